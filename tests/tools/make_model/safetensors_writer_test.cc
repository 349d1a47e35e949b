#include "engine/model/safetensors_writer.h"

#include <gtest/gtest.h>

#include <cstring>

#include "nlohmann/json.hpp"
#include "tests/tools/make_model/run_make_model.h"

namespace ernie::model {
namespace {

using ernie::make_model::testing::ReadFile;
using ernie::make_model::testing::TempDir;

uint64_t HeaderLength(const std::string& file) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(file[i]);
  return n;
}

TEST(SafetensorsWriterTest, WritesSortedAlignedHeaderAndDataInNameOrder) {
  TempDir dir("st_writer");
  // Deliberately unsorted, odd sizes, mixed dtypes.
  const std::vector<SafetensorsTensorSpec> specs = {
      {.name = "zeta", .dtype = "F32", .shape = {3}},
      {.name = "alpha", .dtype = "BF16", .shape = {1, 3}},
      {.name = "mid", .dtype = "F16", .shape = {}}};
  std::vector<std::pair<size_t, uint64_t>> calls;
  auto fill = [&](size_t index, uint64_t offset, std::span<uint8_t> chunk) {
    calls.emplace_back(index, offset);
    for (size_t i = 0; i < chunk.size(); ++i) chunk[i] = static_cast<uint8_t>(0x10 * (index + 1) + i);
    return absl::OkStatus();
  };
  const std::string path = dir / "x.safetensors";
  ASSERT_TRUE(WriteSafetensors(path, specs, fill).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  const std::string file = ReadFile(path);
  const uint64_t n = HeaderLength(file);
  EXPECT_EQ(n % 8, 0u);
  const std::string header_text = file.substr(8, n);
  const std::string padding = header_text.substr(header_text.rfind('}') + 1);
  EXPECT_EQ(padding, std::string(padding.size(), ' '));
  EXPECT_LT(padding.size(), 8u);
  const auto header = nlohmann::json::parse(header_text);
  EXPECT_EQ(header["__metadata__"], nlohmann::json({{"format", "pt"}}));
  EXPECT_EQ(header["alpha"]["dtype"], "BF16");
  EXPECT_EQ(header["alpha"]["shape"], nlohmann::json({1, 3}));
  EXPECT_EQ(header["alpha"]["data_offsets"], nlohmann::json({0, 6}));
  EXPECT_EQ(header["mid"]["shape"], nlohmann::json::array());
  EXPECT_EQ(header["mid"]["data_offsets"], nlohmann::json({6, 8}));
  EXPECT_EQ(header["zeta"]["data_offsets"], nlohmann::json({8, 20}));
  // Entries appear sorted in the text itself, metadata first.
  EXPECT_LT(header_text.find("__metadata__"), header_text.find("\"alpha\""));
  EXPECT_LT(header_text.find("\"alpha\""), header_text.find("\"mid\""));
  EXPECT_LT(header_text.find("\"mid\""), header_text.find("\"zeta\""));

  ASSERT_EQ(file.size(), 8 + n + 20);
  EXPECT_EQ(static_cast<uint8_t>(file[8 + n]), 0x20);       // alpha (spec 1) first
  EXPECT_EQ(static_cast<uint8_t>(file[8 + n + 6]), 0x30);   // then mid (spec 2)
  EXPECT_EQ(static_cast<uint8_t>(file[8 + n + 8]), 0x10);   // then zeta (spec 0)
  EXPECT_EQ(calls, (std::vector<std::pair<size_t, uint64_t>>{{1, 0}, {2, 0}, {0, 0}}));
}

TEST(SafetensorsWriterTest, HandsOutChunksInOrder) {
  TempDir dir("st_chunks");
  const std::vector<SafetensorsTensorSpec> specs = {{.name = "t", .dtype = "BF16", .shape = {13}}};
  std::vector<std::pair<uint64_t, size_t>> chunks;
  auto fill = [&](size_t, uint64_t offset, std::span<uint8_t> chunk) {
    chunks.emplace_back(offset, chunk.size());
    std::memset(chunk.data(), 1, chunk.size());
    return absl::OkStatus();
  };
  ASSERT_TRUE(WriteSafetensors(dir / "t.safetensors", specs, fill, {.chunk_bytes = 10}).ok());
  EXPECT_EQ(chunks, (std::vector<std::pair<uint64_t, size_t>>{{0, 8}, {8, 8}, {16, 8}, {24, 2}}));
}

TEST(SafetensorsWriterTest, RejectsBadSpecsAndPropagatesFillerErrors) {
  TempDir dir("st_bad");
  auto ok_fill = [](size_t, uint64_t, std::span<uint8_t>) { return absl::OkStatus(); };
  const std::vector<SafetensorsTensorSpec> dup = {{.name = "a", .dtype = "F32", .shape = {1}},
                                                  {.name = "a", .dtype = "F32", .shape = {1}}};
  const absl::Status dup_status = WriteSafetensors(dir / "d.safetensors", dup, ok_fill);
  EXPECT_EQ(dup_status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(dup_status.message().find("duplicate"), std::string::npos);

  const std::vector<SafetensorsTensorSpec> bad_dtype = {{.name = "a", .dtype = "I8", .shape = {1}}};
  EXPECT_EQ(WriteSafetensors(dir / "b.safetensors", bad_dtype, ok_fill).code(),
            absl::StatusCode::kInvalidArgument);

  const std::vector<SafetensorsTensorSpec> good = {{.name = "a", .dtype = "F32", .shape = {4}}};
  auto failing = [](size_t, uint64_t, std::span<uint8_t>) { return absl::DataLossError("boom"); };
  EXPECT_EQ(WriteSafetensors(dir / "f.safetensors", good, failing).code(), absl::StatusCode::kDataLoss);
  EXPECT_FALSE(std::filesystem::exists(dir / "f.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir / "f.safetensors.tmp"));

  const absl::Status unwritable = WriteSafetensors(dir / "no/such/dir/x.safetensors", good, ok_fill);
  EXPECT_FALSE(unwritable.ok());
  EXPECT_NE(unwritable.message().find("no/such/dir"), std::string::npos);
}

}  // namespace
}  // namespace ernie::model
