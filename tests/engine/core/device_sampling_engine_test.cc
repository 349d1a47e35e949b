// The engine's device-sampling path (Backend::ForwardAndSample), on the CPU:
// a backend that "samples on its device" as the CUDA backend does (the row's
// logit_bias and penalties applied as edits of its logits row, then the host
// Sampler with no processors left; the min_tokens ban by id) makes the engine
// route each row either to the device or, for rows with processors and
// logprobs, to the host fallback. Every request must then produce exactly
// what the plain logits path produces (tokens and logprobs), including n > 1
// forks and seeded draws, and both routes must actually be taken.
#include <gtest/gtest.h>

#include <map>

#include "absl/strings/str_cat.h"

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/core/engine_core.h"
#include "engine/sample/logit_edit.h"
#include "engine/sample/sampler.h"

namespace ernie {
namespace {

// The CPU backend plus ForwardAndSample done with the host Sampler: what a
// device sampler must reproduce.
class HostSamplingBackend : public Backend {
 public:
  explicit HostSamplingBackend(Backend* inner)
      // The engine's eos ids, so min_tokens bans on "device" rows ban what the host would.
      : inner_(inner),
        sampler_(*Sampler::Create({.vocab_size = static_cast<int32_t>(inner->vocab_size()), .eos_token_ids = {2}})) {}

  std::string_view name() const override { return "host-sampling"; }
  const KvCacheShape& kv_shape() const override { return inner_->kv_shape(); }
  int64_t vocab_size() const override { return inner_->vocab_size(); }
  int64_t max_tokens_per_step() const override { return inner_->max_tokens_per_step(); }
  absl::Status Forward(const StepBatch& batch, std::span<float> logits) override {
    return inner_->Forward(batch, logits);
  }
  absl::Status CopyBlocks(std::span<const BlockCopyOp> copies) override { return inner_->CopyBlocks(copies); }
  bool SupportsDeviceSampling() const override { return true; }

  absl::Status ForwardAndSample(const StepBatch& batch, const DeviceSamplingRequest& request,
                                std::span<SampledToken> sampled, std::span<float> host_logits) override {
    if (absl::Status s = ValidateDeviceSamplingRequest(batch, request, vocab_size(), sampled, host_logits); !s.ok())
      return s;
    const auto vocab = static_cast<size_t>(vocab_size());
    std::vector<float> logits(batch.logit_token_indices.size() * vocab);
    if (absl::Status s = inner_->Forward(batch, logits); !s.ok()) return s;
    for (size_t i = 0; i < request.rows.size(); ++i) {
      const DeviceSampleRow& row = request.rows[i];
      // A ban in force must come with its ids (eos + stop ids), as a device needs them.
      if (row.position < static_cast<uint64_t>(row.params->min_tokens) &&
          (row.banned_ids == nullptr || row.banned_ids->empty() || row.banned_ids->front() != 2))
        return absl::InvalidArgumentError("a min_tokens row reached the device without its banned ids");
      // The processors as the device does them: edits of the row, from the
      // tokens the row points at, then a sampler that sees no processor.
      SamplingParams plain = *row.params;
      plain.logit_bias.clear();
      plain.repetition_penalty = 1.0f;
      plain.frequency_penalty = plain.presence_penalty = 0.0f;
      SamplerRow host_row{.params = &plain, .seed = row.seed, .sample_index = row.sample_index};
      for (uint64_t p = 0; p < row.position; ++p) host_row.output.Add(0);  // only the count is read
      std::vector<float> one(logits.begin() + static_cast<ptrdiff_t>(row.logit_row * vocab),
                             logits.begin() + static_cast<ptrdiff_t>((row.logit_row + 1) * vocab));
      if (row.edits != nullptr) {  // ValidateDeviceSamplingRequest: current, and present whenever needed
        ApplyLogitEdits(row.edits->edits(), row.edits->params(), one);
        ++edited_rows;
      }
      const SamplerRow* rows[] = {&host_row};
      auto got = sampler_.Sample(one, rows);
      if (!got.ok()) return got.status();
      sampled[i] = (*got)[0];
      ++device_rows;
    }
    for (size_t h = 0; h < request.host_logit_rows.size(); ++h) {
      std::copy_n(logits.begin() + static_cast<ptrdiff_t>(request.host_logit_rows[h] * vocab), vocab,
                  host_logits.begin() + static_cast<ptrdiff_t>(h * vocab));
      ++host_rows;
    }
    return absl::OkStatus();
  }

  int64_t device_rows = 0, host_rows = 0, edited_rows = 0;

 private:
  Backend* inner_;
  Sampler sampler_;
};

class Collect : public RequestSink {
 public:
  void OnOutput(const SampleOutput& out) override {
    auto& s = samples[out.index];
    s.tokens.insert(s.tokens.end(), out.token_ids.begin(), out.token_ids.end());
    for (const auto& t : out.logprobs) {
      s.logprobs.push_back(t.logprob.value_or(0));
      for (const auto& top : t.top_logprobs) s.top.push_back(top.token_id);
    }
  }
  void OnError(const absl::Status& s) override { error = s; }
  struct Sample {
    std::vector<int32_t> tokens;
    std::vector<float> logprobs;
    std::vector<int32_t> top;
  };
  std::map<int, Sample> samples;
  absl::Status error;
};

std::vector<SamplingParams> MixedParams() {
  std::vector<SamplingParams> out;
  out.push_back({.temperature = 0.0f});                                      // greedy: device
  out.push_back({.temperature = 0.8f, .top_p = 0.8f, .seed = 7});            // device
  out.push_back({.temperature = 1.0f, .top_k = 5, .seed = 11, .n = 3});      // device, forked
  out.push_back({.temperature = 0.7f, .min_p = 0.1f, .seed = 3, .logprobs = true, .top_logprobs = 4});
  SamplingParams bias{.temperature = 0.9f, .seed = 5};                       // device: logit_bias edits
  bias.logit_bias[17] = 5.0f;
  out.push_back(bias);
  out.push_back({.temperature = 0.9f, .repetition_penalty = 1.3f, .seed = 9});  // device: penalty edits
  out.push_back({.temperature = 1.0f, .seed = 13, .min_tokens = 3, .n = 2});    // device bans
  // Greedy under strong penalties: the edits decide every token.
  out.push_back({.temperature = 0.0f, .repetition_penalty = 1.8f, .presence_penalty = 1.5f,
                 .frequency_penalty = 0.7f});
  SamplingParams forked_bias{.temperature = 1.1f, .top_k = 20, .frequency_penalty = 0.9f, .seed = 21, .n = 2};
  forked_bias.logit_bias[40] = -3.0f;
  out.push_back(forked_bias);                                                // device: a fork's shared row
  // logprobs are of the raw logits, so a penalized row that asks for them
  // stays on the host.
  out.push_back({.temperature = 0.8f, .repetition_penalty = 1.2f, .seed = 17, .logprobs = true, .top_logprobs = 2});
  for (SamplingParams& p : out) p.max_tokens = 9;
  return out;
}

std::map<std::string, Collect> RunAll(Backend* backend, int64_t* preemptions = nullptr) {
  EngineConfig config{.scheduler = {.max_num_seqs = 16, .max_num_batched_tokens = 24}, .max_model_len = 64,
                      .eos_token_ids = {2}};
  auto engine = EngineCore::Create(backend, config);
  EXPECT_TRUE(engine.ok()) << engine.status();
  std::map<std::string, std::shared_ptr<Collect>> sinks;
  const auto params = MixedParams();
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string id = absl::StrCat("r", 100 + i);
    sinks[id] = std::make_shared<Collect>();
    std::vector<int32_t> prompt;
    for (size_t j = 0; j < 5 + 3 * i; ++j) prompt.push_back(static_cast<int32_t>(3 + (j * 31 + i * 7) % 90));
    EXPECT_TRUE((*engine)->AddRequest({.request_id = id, .prompt_token_ids = prompt, .sampling = params[i],
                                       .sink = sinks[id]})
                    .ok());
  }
  for (int step = 0; step < 500 && (*engine)->Step(); ++step) {
  }
  if (preemptions != nullptr) *preemptions = (*engine)->Load().preemptions;
  std::map<std::string, Collect> out;
  for (auto& [id, sink] : sinks) out[id] = *sink;
  return out;
}

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

TEST_F(DeviceSamplingEngineTest, DeviceAndHostRoutesGiveThePlainPathsTokens) {
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
  // Both routes were taken: up to 9 rows of each device sample (the bias and
  // penalty rows edited there), and the penalized row with logprobs on the host.
  EXPECT_GT(routed_backend.device_rows, 20);
  EXPECT_GE(routed_backend.edited_rows, 30);
  EXPECT_GE(routed_backend.host_rows, 5);
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

TEST(CanSampleOnDeviceTest, RefusesWhatOnlyTheHostSamplerHas) {
  EXPECT_TRUE(CanSampleOnDevice({.temperature = 0.0f}, 0));
  EXPECT_TRUE(CanSampleOnDevice({.temperature = 0.8f, .top_p = 0.9f, .top_k = 40, .min_p = 0.05f,
                                 .logprobs = true, .top_logprobs = 20},
                                0));
  // Bias and penalties edit the row on the device, unless the row wants the
  // raw logits' logprobs.
  SamplingParams bias;
  bias.logit_bias[3] = 1.0f;
  EXPECT_TRUE(CanSampleOnDevice(bias, 0));
  EXPECT_TRUE(CanSampleOnDevice({.repetition_penalty = 1.1f}, 0));
  EXPECT_TRUE(CanSampleOnDevice({.presence_penalty = 0.5f}, 0));
  EXPECT_TRUE(CanSampleOnDevice({.frequency_penalty = -0.5f}, 0));
  bias.logprobs = true;
  EXPECT_FALSE(CanSampleOnDevice(bias, 0));
  EXPECT_FALSE(CanSampleOnDevice({.repetition_penalty = 1.1f, .logprobs = true}, 0));
  EXPECT_FALSE(CanSampleOnDevice({.frequency_penalty = 0.2f, .logprobs = true, .top_logprobs = 1}, 0));
  EXPECT_FALSE(CanSampleOnDevice({.min_tokens = 4}, 3));  // a ban in force, ids unknown
  EXPECT_TRUE(CanSampleOnDevice({.min_tokens = 4}, 3, 2));  // ... or known and few: the device bans them
  EXPECT_FALSE(CanSampleOnDevice({.min_tokens = 4}, 3, kMaxDeviceBannedIds + 1));
  EXPECT_TRUE(CanSampleOnDevice({.min_tokens = 4}, 4));
}

TEST(BackendSeamTest, PlainBackendsRefuseForwardAndSample) {
  auto m = LoadModel(std::string(ERNIE_TEST_DATA_DIR) + "/dense_reference/gqa2_bf16_untied_v1002");
  ASSERT_TRUE(m.ok()) << m.status();
  auto c = cpu::CpuBackend::Create(**m, {.num_threads = 1, .block_size = 4, .num_blocks = 8, .max_tokens_per_step = 8});
  ASSERT_TRUE(c.ok()) << c.status();
  const int32_t ids[] = {5}, pos[] = {0}, table[] = {0}, rows[] = {0};
  const SequenceSlice seq{0, 1, 0, table};
  const absl::Status s = (*c)->ForwardAndSample({ids, pos, {&seq, 1}, rows}, {}, {}, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
}

}  // namespace
}  // namespace ernie
