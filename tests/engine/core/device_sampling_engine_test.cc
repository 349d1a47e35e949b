// The engine's device-sampling path (Backend::ForwardAndSample), on the CPU:
// a backend that "samples on its device" as the CUDA backend does (the row's
// logit_bias and penalties applied as edits of its logits row and its
// min_tokens ban by id, then the host Sampler with no processors left;
// logprobs of the raw row) makes the engine send every row there. Every
// request must then produce exactly what the plain logits path produces
// (tokens and logprobs), including n > 1 forks, seeded draws and rows that
// want logprobs beside their processors.
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
                                std::span<SampledToken> sampled) override {
    if (absl::Status s = ValidateDeviceSamplingRequest(batch, request, sampled); !s.ok()) return s;
    const auto vocab = static_cast<size_t>(vocab_size());
    std::vector<float> logits(batch.logit_token_indices.size() * vocab);
    if (absl::Status s = inner_->Forward(batch, logits); !s.ok()) return s;
    for (size_t i = 0; i < request.rows.size(); ++i) {
      const DeviceSampleRow& row = request.rows[i];
      // A ban in force must come with its ids (eos + stop ids), as a device needs them.
      const bool banning = row.position < static_cast<uint64_t>(row.params->min_tokens);
      if (banning && (row.banned_ids->empty() || row.banned_ids->front() != 2))
        return absl::InvalidArgumentError("a min_tokens row reached the device without its banned ids");
      // The processors as the device does them: edits of the row, from the
      // tokens the row points at, then a sampler that sees no processor but
      // the ban (the Sampler bans the same ids after the other processors).
      SamplingParams plain = *row.params;
      plain.logit_bias.clear();
      plain.repetition_penalty = 1.0f;
      plain.frequency_penalty = plain.presence_penalty = 0.0f;
      SamplerRow host_row{.params = &plain, .seed = row.seed, .sample_index = row.sample_index};
      for (uint64_t p = 0; p < row.position; ++p) host_row.output.Add(0);  // only the count is read
      const std::vector<float> raw(logits.begin() + static_cast<ptrdiff_t>(row.logit_row * vocab),
                                   logits.begin() + static_cast<ptrdiff_t>((row.logit_row + 1) * vocab));
      std::vector<float> one = raw;
      const bool edited = row.edits != nullptr && !row.edits->edits().empty();
      if (edited) {  // ValidateDeviceSamplingRequest: current, and present whenever needed
        ApplyLogitEdits(row.edits->edits(), row.edits->params(), one);
        ++edited_rows;
      }
      const SamplerRow* rows[] = {&host_row};
      auto got = sampler_.Sample(one, rows);
      if (!got.ok()) return got.status();
      sampled[i] = (*got)[0];
      if (edited && plain.logprobs && raw_pass) {
        // The device's raw pass: log-probabilities of the unedited row. The
        // same Sampler on it, greedy, with a bias that makes the drawn token
        // the argmax (logprobs are taken before any processor).
        SamplingParams forced = plain;
        forced.temperature = 0.0f;
        forced.min_tokens = 0;
        forced.logit_bias = {{sampled[i].token_id, 1e30f}};
        SamplerRow raw_row{.params = &forced};
        std::vector<float> copy = raw;
        const SamplerRow* raw_rows[] = {&raw_row};
        auto from_raw = sampler_.Sample(copy, raw_rows);
        if (!from_raw.ok()) return from_raw.status();
        if ((*from_raw)[0].token_id != sampled[i].token_id) return absl::InternalError("the forced draw missed");
        sampled[i].logprob = (*from_raw)[0].logprob;
        sampled[i].top_logprobs = (*from_raw)[0].top_logprobs;
        ++raw_passes;
      }
      ++device_rows;
    }
    return absl::OkStatus();
  }

  int64_t device_rows = 0, edited_rows = 0, raw_passes = 0;
  bool raw_pass = true;  // false: logprobs of the edited row (wrong; shows the test can tell)

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
  // logprobs are of the raw logits: penalized and biased rows that ask for
  // them take the device's raw pass (one greedy, so its tokens are the
  // edited argmax while its logprobs are not of it).
  out.push_back({.temperature = 0.8f, .repetition_penalty = 1.2f, .seed = 17, .logprobs = true, .top_logprobs = 2});
  SamplingParams biased_logprobs{.temperature = 0.0f, .presence_penalty = 0.8f, .logprobs = true, .top_logprobs = 3};
  biased_logprobs.logit_bias[23] = 2.5f;
  out.push_back(biased_logprobs);
  // More banned ids than the device once took in its sampling kernel (8),
  // with logprobs, under min_tokens: the engine must send the ids. (This
  // double bans through the host Sampler, which takes logprobs before its
  // processors anyway; the device's raw pass for a banned row is
  // cuda_device_sampler_test's.)
  out.push_back({.temperature = 0.9f, .seed = 29, .stop_token_ids = {4, 5, 6, 7, 8, 9, 10, 11, 12, 13},
                 .min_tokens = 4, .logprobs = true, .top_logprobs = 1});
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
