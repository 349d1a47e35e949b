// OutputCheckpoint writes each replacement at its planned place: the file it
// finishes must be byte for byte what model::WriteSafetensors writes for the
// same tensors, whatever order the replacements came in; a replacement that
// does not match the plan, or one that never comes, is an error that leaves
// no checkpoint behind.
#include "tools/quantize/output_checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "engine/model/safetensors_writer.h"
#include "engine/util/half.h"
#include "tests/tools/quantize/quantize_test_util.h"

namespace ernie::quantize {
namespace {

using testing::TempDir;

std::vector<uint8_t> FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct Spec {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// Writes `tensors` as DIR/model.safetensors with the library's writer.
void WriteFile(const std::string& dir, const std::vector<Spec>& tensors) {
  std::vector<model::SafetensorsTensorSpec> specs;
  for (const Spec& t : tensors) specs.push_back({t.name, t.dtype, t.shape});
  const absl::Status written = model::WriteSafetensors(
      dir + "/model.safetensors", specs, [&](size_t index, uint64_t offset, std::span<uint8_t> chunk) {
        std::memcpy(chunk.data(), tensors[index].bytes.data() + offset, chunk.size());
        return absl::OkStatus();
      });
  ASSERT_TRUE(written.ok()) << written;
}

std::vector<uint8_t> Bf16Bytes(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t b = FloatToBf16(values[i]);
    std::memcpy(bytes.data() + 2 * i, &b, 2);
  }
  return bytes;
}

template <typename T>
std::vector<uint8_t> RawBytes(const std::vector<T>& values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(T));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

class OutputCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A linear to quantize (in 64, out 16), its bias, a norm to fold, a
    // router to write as float32, and tensors left alone (odd sizes too).
    for (int i = 0; i < 64 * 16; ++i) weight_.push_back(0.01f * static_cast<float>((i * 37) % 101 - 50));
    input_ = {{"a.q_proj.weight", "BF16", {16, 64}, Bf16Bytes(weight_)},
              {"a.q_proj.bias", "BF16", {16}, Bf16Bytes(std::vector<float>(16, 0.5f))},
              {"a.norm.weight", "BF16", {64}, Bf16Bytes(std::vector<float>(64, 1.0f))},
              {"a.router.weight", "BF16", {3, 64}, Bf16Bytes(std::vector<float>(3 * 64, 0.25f))},
              {"embed.weight", "BF16", {5, 7}, Bf16Bytes(std::vector<float>(35, 2.0f))},
              {"z.odd", "F16", {3}, std::vector<uint8_t>(6, 0x11)}};
    WriteFile(in_dir_.path(), input_);
    auto opened = Checkpoint::Open(in_dir_.path());
    ASSERT_TRUE(opened.ok()) << opened.status();
    checkpoint_ = std::move(*opened);
    plan_ = OutputPlan{.quantized = {{"a.q_proj", 64, 16}}, .group_size = 32, .float32 = {"a.router.weight"}};
  }
  const TensorView& View(const std::string& name) { return *checkpoint_->Find(name).value(); }

  TempDir in_dir_{"output_checkpoint_in"}, out_dir_{"output_checkpoint_out"};
  std::vector<float> weight_;
  std::vector<Spec> input_;
  std::unique_ptr<Checkpoint> checkpoint_;
  OutputPlan plan_;
};

TEST_F(OutputCheckpointTest, WritesWhatTheLibraryWriterWritesInAnyOrder) {
  const AwqTensors q = QuantizeGroupwise(weight_.data(), 16, 64, 32);
  const std::vector<float> norm(64, 0.75f), router(3 * 64, -1.5f), bias(16, 0.125f);
  {
    auto out = OutputCheckpoint::Create(*checkpoint_, plan_, out_dir_.path());
    ASSERT_TRUE(out.ok()) << out.status();
    // Later tensors in file order first.
    (*out)->ReplaceFloat(View("a.router.weight"), router, DType::kF32);
    (*out)->ReplaceWithAwq("a.q_proj", q);
    (*out)->ReplaceFloat(View("a.norm.weight"), norm);
    (*out)->ReplaceFloat(View("a.q_proj.bias"), bias);
    ASSERT_TRUE((*out)->status().ok()) << (*out)->status();
    const absl::Status finished = (*out)->Finish();
    ASSERT_TRUE(finished.ok()) << finished;
  }
  TempDir expected_dir("output_checkpoint_expected");
  WriteFile(expected_dir.path(), {{"a.norm.weight", "BF16", {64}, Bf16Bytes(norm)},
                                  {"a.q_proj.bias", "BF16", {16}, Bf16Bytes(bias)},
                                  {"a.q_proj.qweight", "I32", {64, 2}, RawBytes(q.qweight)},
                                  {"a.q_proj.qzeros", "I32", {2, 2}, RawBytes(q.qzeros)},
                                  {"a.q_proj.scales", "F16", {2, 16}, RawBytes(q.scales)},
                                  {"a.router.weight", "F32", {3, 64}, RawBytes(router)},
                                  input_[4],
                                  input_[5]});
  const auto got = FileBytes(out_dir_ / "model.safetensors");
  EXPECT_FALSE(got.empty());
  EXPECT_TRUE(got == FileBytes(expected_dir / "model.safetensors")) << "the files differ";
  EXPECT_FALSE(std::filesystem::exists(out_dir_ / "model.safetensors.tmp"));
}

TEST_F(OutputCheckpointTest, AReplacementThatNeverCameIsAnErrorAndLeavesNoFile) {
  {
    auto out = OutputCheckpoint::Create(*checkpoint_, plan_, out_dir_.path());
    ASSERT_TRUE(out.ok()) << out.status();
    (*out)->ReplaceFloat(View("a.router.weight"), std::vector<float>(3 * 64, 1.0f), DType::kF32);
    const absl::Status finished = (*out)->Finish();
    EXPECT_EQ(finished.code(), absl::StatusCode::kInternal);
    EXPECT_NE(finished.message().find("'a.q_proj.qweight' was never written"), std::string::npos) << finished;
  }
  // The router's float32 copy is planned: without it there is nothing to copy either.
  {
    auto out = OutputCheckpoint::Create(*checkpoint_, plan_, out_dir_.path());
    ASSERT_TRUE(out.ok()) << out.status();
    (*out)->ReplaceWithAwq("a.q_proj", QuantizeGroupwise(weight_.data(), 16, 64, 32));
    const absl::Status finished = (*out)->Finish();
    EXPECT_NE(finished.message().find("'a.router.weight' was never written"), std::string::npos) << finished;
  }
  EXPECT_TRUE(std::filesystem::is_empty(out_dir_.path()));
}

TEST_F(OutputCheckpointTest, WritesOutsideThePlanAreErrors) {
  auto expect_error = [&](const std::function<void(OutputCheckpoint&)>& write, const std::string& fragment) {
    auto out = OutputCheckpoint::Create(*checkpoint_, plan_, out_dir_.path());
    ASSERT_TRUE(out.ok()) << out.status();
    write(**out);
    EXPECT_EQ((*out)->status().code(), absl::StatusCode::kInternal);
    EXPECT_NE((*out)->status().message().find(fragment), std::string::npos) << (*out)->status();
    EXPECT_EQ((*out)->Finish().code(), absl::StatusCode::kInternal);  // the first error, again
  };
  // A router rounded to bf16 where the plan keeps float32.
  expect_error([&](OutputCheckpoint& out) { out.ReplaceFloat(View("a.router.weight"), std::vector<float>(192, 1)); },
               "'a.router.weight' was planned as F32 [3, 64] but written as BF16 [3, 64]");
  // AWQ tensors of a linear the plan keeps float, or of another group size.
  expect_error([&](OutputCheckpoint& out) { out.ReplaceWithAwq("embed", QuantizeGroupwise(weight_.data(), 16, 64, 32)); },
               "'embed.qweight' is not in the output's plan");
  expect_error([&](OutputCheckpoint& out) { out.ReplaceWithAwq("a.q_proj", QuantizeGroupwise(weight_.data(), 16, 64, 64)); },
               "'a.q_proj.qzeros' was planned as I32 [2, 2] but written as I32 [1, 2]");
  EXPECT_TRUE(std::filesystem::is_empty(out_dir_.path()));
}

TEST_F(OutputCheckpointTest, APlanTheInputCannotMeetIsRefused) {
  OutputPlan plan = plan_;
  plan.quantized = {{"a.missing", 64, 16}};
  EXPECT_EQ(OutputCheckpoint::Create(*checkpoint_, plan, out_dir_.path()).status().code(), absl::StatusCode::kNotFound);
  plan.quantized = {{"a.q_proj", 32, 16}};  // the weight is [16, 64]
  EXPECT_EQ(OutputCheckpoint::Create(*checkpoint_, plan, out_dir_.path()).status().code(),
            absl::StatusCode::kInvalidArgument);
  plan.quantized = {{"a.q_proj", 64, 16}};
  plan.group_size = 48;
  const auto bad_group = OutputCheckpoint::Create(*checkpoint_, plan, out_dir_.path());
  EXPECT_EQ(bad_group.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_group.status().message().find("group size 48"), std::string::npos) << bad_group.status();
  plan = plan_;
  plan.float32 = {"a.nothing"};
  EXPECT_EQ(OutputCheckpoint::Create(*checkpoint_, plan, out_dir_.path()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(std::filesystem::is_empty(out_dir_.path()));
}

}  // namespace
}  // namespace ernie::quantize
