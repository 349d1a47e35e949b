// The engine's device-sampling path (Backend::ForwardAndSample), on the CPU:
// a backend that "samples on its device" as the CUDA backend does (the row's
// logit_bias and penalties applied as edits of its logits row and its
// min_tokens ban by id, then the host Sampler with no processors left;
// logprobs of the raw row) makes the engine send every row there. Every
// request must then produce exactly what the plain logits path produces
// (tokens and logprobs), including n > 1 forks, seeded draws and rows that
// want logprobs beside their processors.
#include <gtest/gtest.h>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/core/engine_core.h"
#include "tests/engine/core/host_sampling_backend.h"
#include "tests/engine/core/mixed_requests.h"

namespace ernie {
namespace {

class DeviceSamplingEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = LoadModel(std::string(ERNIE_TEST_DATA_DIR) + "/dense_reference/gqa2_bf16_untied_v1002");
    ASSERT_TRUE(m.ok()) << m.status();
    model_ = std::move(*m);
    auto c = cpu::CpuBackend::Create(*model_, {.num_threads = 2, .block_size = 4, .num_blocks = 256,
                                               .max_tokens_per_step = 24});
    ASSERT_TRUE(c.ok()) << c.status();
    cpu_ = std::move(*c);
  }
  std::unique_ptr<LoadedModel> model_;
  std::unique_ptr<cpu::CpuBackend> cpu_;
};

TEST_F(DeviceSamplingEngineTest, DeviceRowsGiveThePlainPathsTokensAndLogprobs) {
  ASSERT_FALSE(cpu_->SupportsDeviceSampling());  // the CPU backend keeps the plain logits path
  const auto plain = RunAll(cpu_.get());
  HostSamplingBackend routed_backend(cpu_.get());
  const auto routed = RunAll(&routed_backend);
  ASSERT_EQ(plain.size(), routed.size());
  for (const auto& [id, want] : plain) {
    const Collect& got = routed.at(id);
    ASSERT_TRUE(want.error.ok()) << id << ": " << want.error;
    ASSERT_TRUE(got.error.ok()) << id << ": " << got.error;
    ASSERT_EQ(want.samples.size(), got.samples.size()) << id;
    for (const auto& [index, sample] : want.samples) {
      EXPECT_FALSE(sample.tokens.empty()) << id;
      EXPECT_EQ(sample.tokens, got.samples.at(index).tokens) << id << " sample " << index;
      EXPECT_EQ(sample.logprobs, got.samples.at(index).logprobs) << id << " sample " << index;
      EXPECT_EQ(sample.top, got.samples.at(index).top) << id << " sample " << index;
    }
  }
  // Every row went to the device: up to 9 rows of each sample, the bias and
  // penalty rows edited there, and those with logprobs given a raw pass.
  EXPECT_GT(routed_backend.device_rows, 100);
  EXPECT_GE(routed_backend.edited_rows, 40);
  EXPECT_GE(routed_backend.raw_passes, 10);
  // The raw pass matters: without it (logprobs of the edited row) the
  // comparison above would fail.
  HostSamplingBackend edited_logprobs(cpu_.get());
  edited_logprobs.raw_pass = false;
  const auto wrong = RunAll(&edited_logprobs);
  int differing = 0;
  for (const auto& [id, want] : plain)
    for (const auto& [index, sample] : want.samples)
      differing += sample.logprobs != wrong.at(id).samples.at(index).logprobs;
  EXPECT_GE(differing, 2) << "the penalized and biased rows with logprobs";
  // The three samples of the forked request differ (each its own draw).
  const auto& forked = plain.at("r102").samples;
  EXPECT_TRUE(forked.at(0).tokens != forked.at(1).tokens || forked.at(1).tokens != forked.at(2).tokens);
}

TEST_F(DeviceSamplingEngineTest, EditsSurvivePreemption) {
  // A KV pool too small for every request at once: sequences are preempted
  // and recomputed, and their edits (kept with their outputs) must still
  // give the plain path's tokens.
  auto small = cpu::CpuBackend::Create(*model_, {.num_threads = 2, .block_size = 4, .num_blocks = 40,
                                                 .max_tokens_per_step = 24});
  ASSERT_TRUE(small.ok()) << small.status();
  int64_t plain_preemptions = 0, routed_preemptions = 0;
  const auto plain = RunAll(small->get(), &plain_preemptions);
  HostSamplingBackend routed_backend(small->get());
  const auto routed = RunAll(&routed_backend, &routed_preemptions);
  EXPECT_GT(routed_preemptions, 0) << "the pool should force preemptions";
  EXPECT_EQ(plain_preemptions, routed_preemptions);
  for (const auto& [id, want] : plain) {
    const Collect& got = routed.at(id);
    ASSERT_TRUE(want.error.ok() && got.error.ok()) << id << ": " << want.error << " / " << got.error;
    for (const auto& [index, sample] : want.samples)
      EXPECT_EQ(sample.tokens, got.samples.at(index).tokens) << id << " sample " << index;
  }
  EXPECT_GE(routed_backend.edited_rows, 30);
}

TEST(DeviceSamplingRequestTest, NamesWhatARowLacks) {
  const int32_t ids[] = {5}, pos[] = {0}, table[] = {0}, logit_rows[] = {0};
  const SequenceSlice seq{0, 1, 0, table};
  const StepBatch batch{ids, pos, {&seq, 1}, logit_rows};
  SampledToken out[1];
  auto check = [&](const DeviceSampleRow& row) {
    return ValidateDeviceSamplingRequest(batch, {.rows = {&row, 1}}, out);
  };
  const SamplingParams greedy{.temperature = 0.0f};
  EXPECT_TRUE(check({.logit_row = 0, .params = &greedy}).ok());
  EXPECT_EQ(check({.logit_row = 1, .params = &greedy}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(check({.logit_row = 0}).code(), absl::StatusCode::kInvalidArgument);
  // A ban in force needs its ids; past min_tokens it needs none.
  const SamplingParams banned{.min_tokens = 4};
  const absl::Status no_ids = check({.logit_row = 0, .params = &banned, .position = 3});
  EXPECT_EQ(no_ids.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_ids.message().find("banned ids"), std::string_view::npos) << no_ids;
  const std::vector<int32_t> eos = {2};
  EXPECT_TRUE(check({.logit_row = 0, .params = &banned, .position = 3, .banned_ids = &eos}).ok());
  EXPECT_TRUE(check({.logit_row = 0, .params = &banned, .position = 4}).ok());
  // Processors need their current edits, logprobs or not.
  const SamplingParams penalized{.repetition_penalty = 1.1f, .logprobs = true, .top_logprobs = 20};
  const absl::Status no_edits = check({.logit_row = 0, .params = &penalized});
  EXPECT_EQ(no_edits.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_edits.message().find("edits"), std::string_view::npos) << no_edits;
  const SampleLogitEdits edits(penalized, nullptr, 1000);
  EXPECT_TRUE(check({.logit_row = 0, .params = &penalized, .edits = &edits}).ok());
  EXPECT_EQ(check({.logit_row = 0, .params = &penalized, .position = 1, .edits = &edits}).code(),
            absl::StatusCode::kInvalidArgument);  // edits of 0 output tokens, row at 1
  const SamplingParams too_many{.logprobs = true, .top_logprobs = kMaxTopLogprobs + 1};
  EXPECT_EQ(check({.logit_row = 0, .params = &too_many}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(BackendSeamTest, PlainBackendsRefuseForwardAndSample) {
  auto m = LoadModel(std::string(ERNIE_TEST_DATA_DIR) + "/dense_reference/gqa2_bf16_untied_v1002");
  ASSERT_TRUE(m.ok()) << m.status();
  auto c = cpu::CpuBackend::Create(**m, {.num_threads = 1, .block_size = 4, .num_blocks = 8, .max_tokens_per_step = 8});
  ASSERT_TRUE(c.ok()) << c.status();
  const int32_t ids[] = {5}, pos[] = {0}, table[] = {0}, rows[] = {0};
  const SequenceSlice seq{0, 1, 0, table};
  const absl::Status s = (*c)->ForwardAndSample({ids, pos, {&seq, 1}, rows}, {}, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
}

}  // namespace
}  // namespace ernie
