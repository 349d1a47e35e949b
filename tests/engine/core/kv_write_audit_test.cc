// What the CUDA attention's early keys rest on (kernels/mma_attention.cu,
// AttentionWorkItem::first_new_position): in every step the engine plans, no
// sequence's keys before its first new position share a cache slot with a
// key the step writes, and every such key was written by an earlier step (or
// a fork's tail copy). The attention requests those keys before the step's
// q|k|v kernel has finished; were one of them written in the same step (a
// prefix-cache hit on a block still being filled, a fork sharing a tail, a
// preempted sequence's block handed on), it would read a stale key. Checked
// here on the engine's real scheduler, KV manager and overlapped steps, with
// prefix hits, n > 1 forks, chunked prefill and preemption all happening.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend/instant/instant_backend.h"
#include "engine/core/engine_core.h"
#include "tests/engine/core/mixed_requests.h"

namespace ernie {
namespace {

// Forwards every call to an instant backend and audits each step's batch.
class KvWriteAuditBackend final : public Backend {
 public:
  explicit KvWriteAuditBackend(std::unique_ptr<InstantBackend> inner) : inner_(std::move(inner)) {}

  std::string_view name() const override { return inner_->name(); }
  const KvCacheShape& kv_shape() const override { return inner_->kv_shape(); }
  int64_t vocab_size() const override { return inner_->vocab_size(); }
  int64_t max_tokens_per_step() const override { return inner_->max_tokens_per_step(); }
  absl::Status Forward(const StepBatch& batch, std::span<float> logits) override {
    Audit(batch);
    return inner_->Forward(batch, logits);
  }
  absl::Status CopyBlocks(std::span<const BlockCopyOp> copies) override {
    const int64_t block_size = kv_shape().block_size;
    for (const BlockCopyOp& c : copies) {
      for (int32_t row = 0; row < c.num_tokens; ++row) {
        if (written_.count(int64_t{c.src_block} * block_size + row) == 0)
          violations_.push_back(absl::StrCat("a copy reads block ", c.src_block, " row ", row, ", never written"));
        written_.insert(int64_t{c.dst_block} * block_size + row);
      }
    }
    ++copies_;
    return inner_->CopyBlocks(copies);
  }
  bool SupportsDeviceSampling() const override { return true; }
  absl::Status ForwardAndSample(const StepBatch& batch, const DeviceSamplingRequest& request,
                                std::span<SampledToken> sampled) override {
    Audit(batch);
    return inner_->ForwardAndSample(batch, request, sampled);
  }
  absl::Status LaunchForwardAndSample(const StepBatch& batch, const DeviceSamplingRequest& request) override {
    Audit(batch);
    return inner_->LaunchForwardAndSample(batch, request);
  }
  absl::Status WaitForSamples(std::span<SampledToken> sampled) override { return inner_->WaitForSamples(sampled); }
  bool OverlapsSteps() const override { return true; }

  const std::vector<std::string>& violations() const { return violations_; }
  int64_t steps() const { return steps_; }
  int64_t earlier_keys_read() const { return earlier_keys_read_; }
  int64_t copies() const { return copies_; }

 private:
  // Steps are audited in launch order, which is the order the device runs them.
  void Audit(const StepBatch& batch) {
    const int64_t block_size = kv_shape().block_size;
    auto slot = [&](const SequenceSlice& s, int32_t position) {
      return int64_t{s.block_table[static_cast<size_t>(position / block_size)]} * block_size + position % block_size;
    };
    std::set<int64_t> this_step;
    for (const SequenceSlice& s : batch.sequences)
      for (int32_t p = s.num_cached_tokens; p < s.num_cached_tokens + s.num_new_tokens; ++p) this_step.insert(slot(s, p));
    for (size_t i = 0; i < batch.sequences.size(); ++i) {
      const SequenceSlice& s = batch.sequences[i];
      for (int32_t p = 0; p < s.num_cached_tokens; ++p) {
        ++earlier_keys_read_;
        if (this_step.count(slot(s, p)) > 0)
          violations_.push_back(absl::StrCat("step ", steps_, ": sequence ", i, "'s earlier key ", p,
                                             " is in a slot the step writes"));
        if (written_.count(slot(s, p)) == 0)
          violations_.push_back(absl::StrCat("step ", steps_, ": sequence ", i, "'s earlier key ", p,
                                             " was never written"));
      }
    }
    written_.insert(this_step.begin(), this_step.end());
    ++steps_;
  }

  std::unique_ptr<InstantBackend> inner_;
  std::set<int64_t> written_;  // slots some launched step (or copy) wrote
  std::vector<std::string> violations_;
  int64_t steps_ = 0, earlier_keys_read_ = 0, copies_ = 0;
};

TEST(KvWriteAuditTest, TheAuditSeesAKeyWrittenInTheStepThatReadsIt) {
  // The checker itself: sequence 1 claims block 7's four keys as cached
  // while sequence 0 writes them in the same step; then a key never written.
  auto instant = InstantBackend::Create({.vocab_size = 64, .block_size = 4, .num_blocks = 16});
  ASSERT_TRUE(instant.ok());
  KvWriteAuditBackend backend(std::move(*instant));
  const std::vector<int32_t> tokens = {5, 6, 7, 8, 9}, positions = {0, 1, 2, 3, 4};
  const std::vector<int32_t> shared = {7}, second = {7, 9}, unwritten = {3, 9};
  const std::vector<SequenceSlice> same_step = {
      {.first_token = 0, .num_new_tokens = 4, .num_cached_tokens = 0, .block_table = shared},
      {.first_token = 4, .num_new_tokens = 1, .num_cached_tokens = 4, .block_table = second}};
  std::vector<float> logits(64);
  const std::vector<int32_t> logit_rows = {4};
  ASSERT_TRUE(backend.Forward({.token_ids = tokens, .positions = positions, .sequences = same_step,
                               .logit_token_indices = logit_rows}, logits).ok());
  EXPECT_EQ(backend.violations().size(), 8u);  // keys 0 - 3: written this step, and not before
  const std::vector<SequenceSlice> stale = {
      {.first_token = 0, .num_new_tokens = 1, .num_cached_tokens = 4, .block_table = unwritten}};
  ASSERT_TRUE(backend.Forward({.token_ids = std::span(tokens).first(1), .positions = std::span(positions).subspan(4, 1),
                               .sequences = stale, .logit_token_indices = std::span(logit_rows).first(0)}, {}).ok());
  EXPECT_EQ(backend.violations().size(), 12u);  // block 3 never written
}

TEST(KvWriteAuditTest, NoStepWritesAKeyBeforeASequencesFirstNewPosition) {
  // 20 blocks of 4 tokens: not enough for every sequence at once (preemption).
  auto instant = InstantBackend::Create({.vocab_size = 512, .block_size = 4, .num_blocks = 20});
  ASSERT_TRUE(instant.ok()) << instant.status();
  KvWriteAuditBackend backend(std::move(*instant));
  // A 16-token budget cuts the prompts into chunks; 6 sequences run at most.
  auto engine = EngineCore::Create(&backend, {.scheduler = {.max_num_seqs = 6, .max_num_batched_tokens = 16},
                                              .max_model_len = 128,
                                              .eos_token_ids = {2}});
  ASSERT_TRUE(engine.ok()) << engine.status();
  // Prompts that share a 21-token prefix (five full blocks: prefix-cache
  // hits once the first is committed), with suffixes of 0 - 9 tokens.
  std::vector<int32_t> prefix;
  for (int32_t i = 0; i < 21; ++i) prefix.push_back(3 + (i * 37) % 500);
  std::vector<std::shared_ptr<Collect>> sinks;
  auto add = [&](int index) {
    std::vector<int32_t> prompt = prefix;
    for (int32_t j = 0; j < index % 10; ++j) prompt.push_back(3 + (index * 101 + j * 13) % 500);
    // Every third request asks for three samples (forks sharing the prompt's blocks).
    SamplingParams p{.temperature = 1.0f, .seed = static_cast<uint64_t>(index), .ignore_eos = true,
                     .max_tokens = 6 + index % 7, .n = index % 3 == 0 ? 3 : 1};
    sinks.push_back(std::make_shared<Collect>());
    ASSERT_TRUE((*engine)->AddRequest({.request_id = absl::StrCat("r", index), .prompt_token_ids = prompt,
                                       .sampling = p, .sink = sinks.back()}).ok());
  };
  for (int i = 0; i < 4; ++i) add(i);
  int next = 4;
  for (int step = 0; step < 5000 && (*engine)->HasWork(); ++step) {
    (*engine)->Step();
    if (step % 3 == 0 && next < 24) add(next++);  // arrivals while others run: hits on committed blocks
  }
  ASSERT_FALSE((*engine)->HasWork());
  ASSERT_EQ(next, 24);

  for (const std::string& v : backend.violations()) ADD_FAILURE() << v;
  // The paths the property is about all ran.
  const EngineLoad load = (*engine)->Load();
  EXPECT_GT(load.prefix_hit_tokens, 0);
  EXPECT_GT(load.preemptions, 0);
  EXPECT_GT(backend.copies(), 0);  // a fork's tail copy
  EXPECT_GT(backend.earlier_keys_read(), 0);
  for (size_t i = 0; i < sinks.size(); ++i) {
    const int samples = i % 3 == 0 ? 3 : 1;
    ASSERT_EQ(static_cast<int>(sinks[i]->samples.size()), samples) << "request " << i;
    for (const auto& [index, sample] : sinks[i]->samples)
      EXPECT_EQ(sample.finish, FinishReason::kLength) << "request " << i << " sample " << index;
  }
  EXPECT_EQ(load.kv_blocks_used, 0);
}

}  // namespace
}  // namespace ernie
