#include "engine/model/safetensors.h"

#include <gtest/gtest.h>

#include <random>

#include "tests/engine/model/safetensors_bytes.h"

namespace ernie {
namespace {

using testing::SafetensorsBytes;

std::vector<uint8_t> Data(size_t n) {
  std::vector<uint8_t> d(n);
  for (size_t i = 0; i < n; ++i) d[i] = static_cast<uint8_t>(i * 7 + 1);
  return d;
}

std::string ErrorOf(const std::vector<uint8_t>& bytes) {
  auto r = ParseSafetensors(bytes, "f.safetensors");
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : std::string(r.status().message());
}

TEST(SafetensorsTest, ParsesTensorsAndMetadata) {
  const std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},)"
      R"("b":{"dtype":"F32","shape":[3],"data_offsets":[12,24]},"c":{"dtype":"F16","shape":[],"data_offsets":[24,26]}})";
  const auto bytes = SafetensorsBytes(header, Data(26));
  auto r = ParseSafetensors(bytes, "f.safetensors");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->tensors.size(), 3u);
  const TensorView& a = r->tensors.at("a");
  EXPECT_EQ(a.dtype, DType::kBF16);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.bytes.size(), 12u);
  EXPECT_EQ(a.bytes.data(), bytes.data() + 8 + header.size());  // a view, not a copy
  EXPECT_EQ(r->tensors.at("b").bytes.data(), bytes.data() + 8 + header.size() + 12);
  EXPECT_EQ(r->tensors.at("c").numel(), 1);
  EXPECT_EQ(r->metadata.at("format"), "pt");
}

TEST(SafetensorsTest, ReadsInt32ForAwqPackedWeights) {
  // AWQ's qweight/qzeros: 4 bytes an element, so [2, 3] I32 spans 24 bytes, not 12.
  const std::string header = R"({"q":{"dtype":"I32","shape":[2,3],"data_offsets":[0,24]}})";
  auto r = ParseSafetensors(SafetensorsBytes(header, Data(24)), "f.safetensors");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tensors.at("q").dtype, DType::kI32);
  EXPECT_NE(ErrorOf(SafetensorsBytes(R"({"q":{"dtype":"I32","shape":[2,3],"data_offsets":[0,12]}})", Data(12)))
                .find("shape [2, 3] of I32 needs 24 bytes but data_offsets span 12"),
            std::string::npos);
}

TEST(SafetensorsTest, RejectsShortFile) { EXPECT_NE(ErrorOf({1, 2, 3}).find("shorter than"), std::string::npos); }

TEST(SafetensorsTest, RejectsHeaderLengthBeyondFile) {
  EXPECT_NE(ErrorOf(SafetensorsBytes("{}", {}, 1000)).find("goes beyond the file"), std::string::npos);
  EXPECT_NE(ErrorOf(SafetensorsBytes("{}", {}, UINT64_MAX - 1)).find("goes beyond"), std::string::npos);
}

TEST(SafetensorsTest, RejectsHeaderNotJson) {
  EXPECT_NE(ErrorOf(SafetensorsBytes("{not json", {})).find("not valid JSON"), std::string::npos);
  EXPECT_NE(ErrorOf(SafetensorsBytes("[1,2]", {})).find("not a JSON object"), std::string::npos);
}

TEST(SafetensorsTest, RejectsUnknownDtypeNamingTensor) {
  const auto msg = ErrorOf(SafetensorsBytes(R"({"w":{"dtype":"I8","shape":[2],"data_offsets":[0,2]}})", Data(2)));
  EXPECT_NE(msg.find("f.safetensors"), std::string::npos);
  EXPECT_NE(msg.find("'w'"), std::string::npos);
  EXPECT_NE(msg.find("unsupported dtype 'I8'"), std::string::npos);
}

TEST(SafetensorsTest, RejectsOffsetsOutsideData) {
  const auto msg = ErrorOf(SafetensorsBytes(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", Data(8)));
  EXPECT_NE(msg.find("beyond the data area"), std::string::npos);
}

TEST(SafetensorsTest, RejectsReversedAndNegativeOffsets) {
  EXPECT_NE(ErrorOf(SafetensorsBytes(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", Data(8)))
                .find("reversed"),
            std::string::npos);
  EXPECT_NE(ErrorOf(SafetensorsBytes(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", Data(8)))
                .find("non-negative"),
            std::string::npos);
}

TEST(SafetensorsTest, RejectsShapeSizeMismatch) {
  const auto msg = ErrorOf(SafetensorsBytes(R"({"w":{"dtype":"BF16","shape":[3],"data_offsets":[0,8]}})", Data(8)));
  EXPECT_NE(msg.find("needs 6 bytes but data_offsets span 8"), std::string::npos);
}

TEST(SafetensorsTest, RejectsOverlap) {
  const auto msg = ErrorOf(SafetensorsBytes(
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      Data(12)));
  EXPECT_NE(msg.find("overlaps"), std::string::npos);
}

TEST(SafetensorsTest, RejectsHugeShapesWithoutOverflow) {
  const auto msg = ErrorOf(SafetensorsBytes(
      R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}})", Data(8)));
  EXPECT_NE(msg.find("too large"), std::string::npos);
}

TEST(SafetensorsTest, RejectsMissingFields) {
  EXPECT_NE(ErrorOf(SafetensorsBytes(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", Data(4))).find("dtype"),
            std::string::npos);
  EXPECT_NE(ErrorOf(SafetensorsBytes(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", Data(4))).find("shape"),
            std::string::npos);
  EXPECT_NE(ErrorOf(SafetensorsBytes(R"({"w":{"dtype":"F32","shape":[1]}})", Data(4))).find("data_offsets"),
            std::string::npos);
  EXPECT_NE(ErrorOf(SafetensorsBytes(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", Data(4)))
                .find("shape"),
            std::string::npos);
}

// Whatever the bytes, the parser returns (ok or an error) and never crashes:
// mutate a valid file at random and parse every mutant.
TEST(SafetensorsTest, SurvivesRandomMutations) {
  const std::string header =
      R"({"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},"b":{"dtype":"F32","shape":[3],"data_offsets":[12,24]}})";
  const auto good = SafetensorsBytes(header, Data(24));
  std::mt19937 rng(7);
  for (int iter = 0; iter < 5000; ++iter) {
    auto bytes = good;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
    if (rng() % 5 == 0) bytes.resize(rng() % bytes.size());
    auto r = ParseSafetensors(bytes, "m");
    if (r.ok()) {
      for (const auto& [name, t] : r->tensors) {
        ASSERT_GE(t.bytes.data(), bytes.data());
        ASSERT_LE(t.bytes.data() + t.bytes.size(), bytes.data() + bytes.size());
      }
    }
  }
}

}  // namespace
}  // namespace ernie
