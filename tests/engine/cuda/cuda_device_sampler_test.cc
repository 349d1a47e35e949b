// The device sampler against the host Sampler on the same logits: greedy and
// seeded temperature / top_k / top_p / min_p rows give the same token (the
// inputs are fixed, so the comparison is exact, ties included), logprobs and
// top_logprobs agree within 1e-3. The processors (logit_bias, penalties,
// min_tokens bans of any length) edit the row as the host's do, and rows
// that want logprobs beside them get the raw logits' (the raw pass). Then
// the CUDA backend's ForwardAndSample end to end: every row against the host
// Sampler on Forward's logits, in one lm_head pass and in several.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/device_sampler.h"
#include "engine/backend/cuda/sample_edit_plan.h"
#include "engine/sample/logit_edit.h"
#include "tests/engine/cuda/backend_runner.h"

namespace ernie::testing {
namespace {

// Rows of logits with the shapes that matter: smooth normal rows, a peaked
// one, and one of coarse values with many exact ties.
std::vector<float> MakeLogits(int rows, int vocab, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 2.5f);
  std::vector<float> out(static_cast<size_t>(rows) * static_cast<size_t>(vocab));
  for (int r = 0; r < rows; ++r) {
    for (int i = 0; i < vocab; ++i) {
      float v = normal(gen);
      if (r % 4 == 1) v = std::round(v * 2.0f) / 2.0f;  // ties
      if (r % 4 == 2 && i % 97 == 5) v += 9.0f;         // a few strong tokens
      out[static_cast<size_t>(r) * vocab + i] = v;
    }
  }
  return out;
}

std::vector<SamplingParams> ParamVariants() {
  return {
      {.temperature = 0.0f},
      {.temperature = 0.0f, .logprobs = true, .top_logprobs = 20},
      {.temperature = 1.0f},
      {.temperature = 0.8f, .top_p = 0.8f},
      {.temperature = 1.0f, .top_k = 40},
      {.temperature = 0.7f, .min_p = 0.05f},
      {.temperature = 1.3f, .top_p = 0.95f, .top_k = 50, .min_p = 0.01f},
      {.temperature = 1.0f, .top_k = 1},
      {.temperature = 0.6f, .top_p = 0.5f, .logprobs = true, .top_logprobs = 5},
      {.temperature = 2.0f, .top_p = 0.999f},
      // min_tokens bans in force (eos 2 and the stop ids; id 5 is a strong token of some rows),
      // edited into the row, with logprobs of the raw row.
      {.temperature = 0.0f, .stop_token_ids = {5, 102}, .min_tokens = 1000},
      {.temperature = 0.8f, .top_p = 0.8f, .stop_token_ids = {5}, .min_tokens = 1000, .logprobs = true},
      {.temperature = 0.0f, .stop_token_ids = {5, 102, 199, 296, 393, 490, 587, 684, 781, 878, 975, 5},
       .min_tokens = 1000, .logprobs = true, .top_logprobs = 7},
  };
}

constexpr int32_t kTestEos = 2;

struct Compared {
  int rows = 0, token_mismatches = 0;
  double max_logprob_error = 0;
};

// rows_per_launch sets how many CTAs sample a row (LaunchSampleRows: a
// cluster of 8 for up to 32 rows a launch, 4 up to 64, 2 up to 128, else 1).
Compared CompareOnLogits(int vocab, int logit_rows, int repeats, uint32_t seed, int rows_per_launch) {
  Compared c;
  const auto logits = MakeLogits(logit_rows, vocab, seed);
  const auto params = ParamVariants();
  std::vector<std::vector<int32_t>> bans(params.size());
  for (size_t p = 0; p < params.size(); ++p) {
    bans[p] = {kTestEos};
    bans[p].insert(bans[p].end(), params[p].stop_token_ids.begin(), params[p].stop_token_ids.end());
  }
  // Each sample row its own copy of its logits row (source[i]): a ban edits
  // the row it reads.
  std::vector<DeviceSampleRow> rows;
  std::vector<int> source;
  for (int rep = 0; rep < repeats; ++rep)
    for (int r = 0; r < logit_rows; ++r)
      for (size_t p = 0; p < params.size(); ++p) {
        const auto position = static_cast<uint64_t>(rep * 7 + r);
        rows.push_back({.logit_row = static_cast<int32_t>(rows.size()), .params = &params[p],
                        .seed = 1000u + seed * 31u + static_cast<uint64_t>(rep),
                        .sample_index = static_cast<uint32_t>(p % 3), .position = position,
                        .banned_ids = position < static_cast<uint64_t>(params[p].min_tokens) ? &bans[p] : nullptr});
        source.push_back(r);
      }
  std::vector<float> copies(rows.size() * static_cast<size_t>(vocab));
  for (size_t i = 0; i < rows.size(); ++i)
    std::copy_n(logits.begin() + static_cast<ptrdiff_t>(source[i]) * vocab, vocab,
                copies.begin() + static_cast<ptrdiff_t>(i) * vocab);
  auto device_logits = cuda::DeviceBuffer<float>::Allocate(copies.size(), "test logits");
  EXPECT_TRUE(device_logits.ok());
  EXPECT_EQ(cudaMemcpy(device_logits->data(), copies.data(), copies.size() * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  auto sampler = cuda::DeviceSampler::Create(vocab, rows_per_launch);
  EXPECT_TRUE(sampler.ok()) << sampler.status();
  std::vector<SampledToken> got(rows.size());
  cudaStream_t stream = nullptr;
  EXPECT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const absl::Status s = sampler->Sample(device_logits->data(), 0, rows, got, stream);
  EXPECT_TRUE(s.ok()) << s;
  cudaStreamDestroy(stream);

  auto host = Sampler::Create({.vocab_size = vocab, .eos_token_ids = {kTestEos}});
  EXPECT_TRUE(host.ok());
  for (size_t i = 0; i < rows.size(); ++i) {
    SamplerRow host_row{.params = rows[i].params, .seed = rows[i].seed, .sample_index = rows[i].sample_index};
    for (uint64_t k = 0; k < rows[i].position; ++k) host_row.output.Add(0);
    std::vector<float> one(logits.begin() + static_cast<ptrdiff_t>(source[i]) * vocab,
                           logits.begin() + static_cast<ptrdiff_t>(source[i] + 1) * vocab);
    const SamplerRow* ptr[] = {&host_row};
    auto want = host->Sample(one, ptr);
    EXPECT_TRUE(want.ok()) << want.status();
    ++c.rows;
    const SampledToken& w = (*want)[0];
    if (w.token_id != got[i].token_id) {
      ++c.token_mismatches;
      ADD_FAILURE() << "row " << i << " (logits row " << source[i] << ", params "
                    << (&*rows[i].params - params.data()) << "): host " << w.token_id << ", device "
                    << got[i].token_id;
    }
    EXPECT_EQ(w.logprob.has_value(), got[i].logprob.has_value());
    if (w.logprob && got[i].logprob) c.max_logprob_error = std::max<double>(c.max_logprob_error, std::fabs(*w.logprob - *got[i].logprob));
    EXPECT_EQ(w.top_logprobs.size(), got[i].top_logprobs.size()) << "row " << i;
    for (size_t k = 0; k < std::min(w.top_logprobs.size(), got[i].top_logprobs.size()); ++k) {
      EXPECT_EQ(w.top_logprobs[k].token_id, got[i].top_logprobs[k].token_id) << "row " << i << " top " << k;
      c.max_logprob_error =
          std::max<double>(c.max_logprob_error, std::fabs(w.top_logprobs[k].logprob - got[i].top_logprobs[k].logprob));
    }
  }
  return c;
}

TEST(CudaDeviceSamplerTest, MatchesTheHostSamplerOnTheSameLogits) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  for (const auto& [vocab, rows, repeats] : {std::tuple{1002, 8, 6}, std::tuple{97, 4, 8}, std::tuple{103424, 4, 2}})
    for (const int rows_per_launch : {16, 64, 100, 1024}) {  // clusters of 8, 4, 2 and 1 CTAs a row
      const Compared c = CompareOnLogits(vocab, rows, repeats, static_cast<uint32_t>(vocab), rows_per_launch);
      EXPECT_EQ(c.token_mismatches, 0) << "vocab " << vocab << ", " << rows_per_launch << " rows a launch";
      EXPECT_LE(c.max_logprob_error, 1e-3) << "vocab " << vocab << ", " << rows_per_launch << " rows a launch";
      std::cout << "device sampler vs host, vocab " << vocab << ", " << rows_per_launch << " rows a launch: " << c.rows
                << " rows, " << c.token_mismatches << " token mismatches, max logprob error " << c.max_logprob_error
                << "\n";
    }
}

// logit_bias and the penalties, edited into each row on the device before
// it is sampled, against the host Sampler with the same prompt and output
// tokens: the edits round as the host does, so tokens are equal exactly.
TEST(CudaDeviceSamplerTest, BiasAndPenaltiesEditTheRowAsTheHostDoes) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  for (const int vocab : {1002, 103424}) {
    std::vector<SamplingParams> params = {
        {.temperature = 0.0f, .repetition_penalty = 1.5f},
        {.temperature = 0.0f, .presence_penalty = 2.0f, .frequency_penalty = 1.5f},
        {.temperature = 0.9f, .top_p = 0.9f, .repetition_penalty = 1.3f, .frequency_penalty = 0.4f},
        {.temperature = 1.0f, .top_k = 30, .presence_penalty = -1.0f},
        {.temperature = 0.7f, .min_p = 0.05f, .repetition_penalty = 0.8f, .presence_penalty = 0.5f},
        {.temperature = 0.0f},
        {.temperature = 1.2f},
        // With logprobs: those of the raw row (the raw pass), the token of the edited one.
        {.temperature = 0.0f, .repetition_penalty = 1.5f, .logprobs = true, .top_logprobs = 5},
        {.temperature = 0.0f, .logprobs = true, .top_logprobs = 3},
        // Twelve banned ids under min_tokens (the sampling kernel once took 8), then the edits.
        {.temperature = 0.8f, .top_p = 0.9f, .frequency_penalty = 0.7f,
         .stop_token_ids = {5, 102, 199, 296, 393, 490, 587, 684, 781, 878, 975},
         .min_tokens = 1000, .logprobs = true, .top_logprobs = 20},
    };
    params[5].logit_bias = {{5, 30.0f}, {17, -100.0f}, {vocab - 1, 12.5f}};  // greedy: bias decides
    params[6].logit_bias = {{3, 4.0f}, {99, 6.0f}};
    params[8].logit_bias = {{102, 40.0f}, {vocab - 2, -5.0f}};  // the drawn token is an edited one
    // The output mostly from a row's strong tokens (i % 97 == 5), so the
    // penalties move the tokens the samplers would pick.
    const int repeats = 5, logit_rows = static_cast<int>(params.size()) * repeats;
    const auto logits = MakeLogits(logit_rows, vocab, 77u + static_cast<uint32_t>(vocab));
    std::vector<std::shared_ptr<PromptTokenSet>> prompts;
    std::vector<OutputTokenCounts> outputs(static_cast<size_t>(logit_rows));
    std::vector<std::unique_ptr<SampleLogitEdits>> edits;
    std::vector<std::vector<int32_t>> bans(static_cast<size_t>(logit_rows));
    std::vector<DeviceSampleRow> rows;
    for (int r = 0; r < logit_rows; ++r) {
      std::vector<int32_t> prompt;
      for (int k = 0; k < 20 + r; ++k) prompt.push_back((k * 97 + 5 + r * 31) % vocab);
      prompts.push_back(std::make_shared<PromptTokenSet>(prompt));
      const SamplingParams& p = params[static_cast<size_t>(r) % params.size()];
      edits.push_back(std::make_unique<SampleLogitEdits>(p, prompts.back().get(), vocab));
      for (int k = 0; k < 3 * r; ++k) {
        const int32_t id = ((k % 7) * 97 + 5) % vocab;
        outputs[static_cast<size_t>(r)].Add(id);
        edits.back()->AddOutputToken(id);
      }
      std::vector<int32_t>& banned = bans[static_cast<size_t>(r)];
      banned = {kTestEos};
      banned.insert(banned.end(), p.stop_token_ids.begin(), p.stop_token_ids.end());
      const auto position = static_cast<uint64_t>(outputs[static_cast<size_t>(r)].num_tokens());
      rows.push_back({.logit_row = r, .params = &p, .seed = 500u + static_cast<uint64_t>(r), .sample_index = 0,
                      .position = position,
                      .banned_ids = position < static_cast<uint64_t>(p.min_tokens) ? &banned : nullptr,
                      .edits = HasLogitEdits(p) ? edits.back().get() : nullptr});
    }
    auto device_logits = cuda::DeviceBuffer<float>::Allocate(logits.size(), "test logits");
    ASSERT_TRUE(device_logits.ok());
    ASSERT_EQ(cudaMemcpy(device_logits->data(), logits.data(), logits.size() * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    auto sampler = cuda::DeviceSampler::Create(vocab, 16);  // several launches: edits once, before them all
    ASSERT_TRUE(sampler.ok());
    std::vector<SampledToken> got(rows.size());
    ASSERT_TRUE(sampler->Sample(device_logits->data(), 0, rows, got, nullptr).ok());
    auto host = Sampler::Create({.vocab_size = vocab, .eos_token_ids = {kTestEos}});
    ASSERT_TRUE(host.ok());
    int changed_by_edits = 0, raw_logprob_rows = 0, drawn_edited = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      SamplerRow host_row{.params = rows[i].params, .seed = rows[i].seed, .sample_index = 0,
                          .prompt_tokens = prompts[i], .output = outputs[i]};
      std::vector<float> one(logits.begin() + static_cast<ptrdiff_t>(i) * vocab,
                             logits.begin() + static_cast<ptrdiff_t>(i + 1) * vocab);
      const std::vector<float> raw = one;
      const SamplerRow* ptr[] = {&host_row};
      auto want = host->Sample(one, ptr);
      ASSERT_TRUE(want.ok());
      EXPECT_EQ((*want)[0].token_id, got[i].token_id) << "vocab " << vocab << " row " << i;
      // Logprobs of the raw row, as the host takes them before its processors.
      ASSERT_EQ((*want)[0].logprob.has_value(), got[i].logprob.has_value()) << "row " << i;
      if (got[i].logprob) {
        EXPECT_NEAR(*(*want)[0].logprob, *got[i].logprob, 1e-3) << "vocab " << vocab << " row " << i;
        ASSERT_EQ((*want)[0].top_logprobs.size(), got[i].top_logprobs.size()) << "row " << i;
        for (size_t k = 0; k < got[i].top_logprobs.size(); ++k) {
          EXPECT_EQ((*want)[0].top_logprobs[k].token_id, got[i].top_logprobs[k].token_id) << "row " << i << " top " << k;
          EXPECT_NEAR((*want)[0].top_logprobs[k].logprob, got[i].top_logprobs[k].logprob, 1e-3);
        }
        raw_logprob_rows += 1;
        drawn_edited += edits[i]->EditIndexOf(got[i].token_id) >= 0;
      }
      // The device row now holds the edited logits, bit for bit the host's.
      std::vector<float> edited(static_cast<size_t>(vocab));
      ASSERT_EQ(cudaMemcpy(edited.data(), device_logits->data() + i * vocab, edited.size() * sizeof(float),
                           cudaMemcpyDeviceToHost),
                cudaSuccess);
      EXPECT_EQ(0, std::memcmp(edited.data(), one.data(), edited.size() * sizeof(float))) << "row " << i;
      changed_by_edits += std::memcmp(raw.data(), one.data(), raw.size() * sizeof(float)) != 0;
    }
    EXPECT_EQ(changed_by_edits, logit_rows) << "every row has a processor";
    EXPECT_EQ(raw_logprob_rows, 3 * repeats);
    // Some drawn tokens' raw logits came from the edit kernel's originals
    // (the bias of 40 on id 102 makes it the greedy row's token).
    EXPECT_GE(drawn_edited, repeats) << "vocab " << vocab;
  }
}

// Greedy rows without logprobs or bans take kernels/greedy_rows.h: the
// argmax against the host Sampler's, ties to the smaller id (coarse values,
// -0 beside +0), NaN as -inf, the lowest finite value, a vocabulary that
// leaves the last CTA a partial slice; and the same with the kernel off.
TEST(CudaDeviceSamplerTest, GreedyRowsOnTheGreedyKernelMatchTheHostArgmax) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  for (const int vocab : {97, 2049, 1002, 103424}) {
    const int logit_rows = 9;
    auto logits = MakeLogits(logit_rows, vocab, 5u + static_cast<uint32_t>(vocab));
    auto at = [&](int r, int i) -> float& { return logits[static_cast<size_t>(r) * vocab + i]; };
    for (int i = 0; i < vocab; ++i) {
      at(4, i) = std::round(at(4, i));                      // many ties at the max
      at(5, i) = -std::abs(at(5, i));                       // max 0, as -0 and +0
      if (i % 3 == 0) at(5, i) = (i % 2) ? -0.0f : 0.0f;
      if (i % 5 == 1) at(6, i) = std::nanf("");             // NaN reads as -inf
      at(7, i) = -INFINITY;                                 // only the lowest finite value
    }
    at(7, vocab - 1) = -FLT_MAX;
    at(7, vocab / 2) = -FLT_MAX;
    at(8, vocab - 1) = 1e30f;                               // the last id of a partial slice
    auto device_logits = cuda::DeviceBuffer<float>::Allocate(logits.size(), "test logits");
    ASSERT_TRUE(device_logits.ok());
    ASSERT_EQ(cudaMemcpy(device_logits->data(), logits.data(), logits.size() * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    const SamplingParams greedy{.temperature = 0.0f};
    std::vector<DeviceSampleRow> rows;
    for (int r = 0; r < logit_rows; ++r) rows.push_back({.logit_row = r, .params = &greedy, .position = 3});
    auto host = Sampler::Create({.vocab_size = vocab, .eos_token_ids = {kTestEos}});
    ASSERT_TRUE(host.ok());
    for (const bool fast : {true, false}) {
      auto sampler = cuda::DeviceSampler::Create(vocab, 4, fast);  // three launches of up to 4 rows
      ASSERT_TRUE(sampler.ok());
      std::vector<SampledToken> got(rows.size());
      const absl::Status st = sampler->Sample(device_logits->data(), 0, rows, got, nullptr);
      ASSERT_TRUE(st.ok()) << st;
      for (int r = 0; r < logit_rows; ++r) {
        SamplerRow host_row{.params = &greedy};
        std::vector<float> one(logits.begin() + static_cast<ptrdiff_t>(r) * vocab,
                               logits.begin() + static_cast<ptrdiff_t>(r + 1) * vocab);
        const SamplerRow* ptr[] = {&host_row};
        auto want = host->Sample(one, ptr);
        ASSERT_TRUE(want.ok());
        EXPECT_EQ((*want)[0].token_id, got[static_cast<size_t>(r)].token_id)
            << "vocab " << vocab << " row " << r << (fast ? " (greedy kernel)" : " (sampling kernel)");
        EXPECT_FALSE(got[static_cast<size_t>(r)].logprob.has_value());
      }
    }
  }
  // A greedy row with no finite logit is the same error on the greedy kernel.
  std::vector<float> none(300, -INFINITY);
  none[7] = std::nanf("");
  auto device_none = cuda::DeviceBuffer<float>::Allocate(none.size(), "test logits");
  ASSERT_TRUE(device_none.ok());
  ASSERT_EQ(cudaMemcpy(device_none->data(), none.data(), none.size() * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  auto sampler = cuda::DeviceSampler::Create(300, 4, true);
  ASSERT_TRUE(sampler.ok());
  const SamplingParams greedy{.temperature = 0.0f};
  const DeviceSampleRow row{.logit_row = 0, .params = &greedy};
  SampledToken out[1];
  EXPECT_EQ(sampler->Sample(device_none->data(), 0, {&row, 1}, out, nullptr).code(), absl::StatusCode::kInvalidArgument);
  // Nor is a +inf maximum a token, on either kernel or on the host.
  none[100] = INFINITY;
  none[101] = 3.0f;
  ASSERT_EQ(cudaMemcpy(device_none->data(), none.data(), none.size() * sizeof(float), cudaMemcpyHostToDevice),
            cudaSuccess);
  EXPECT_EQ(sampler->Sample(device_none->data(), 0, {&row, 1}, out, nullptr).code(), absl::StatusCode::kInvalidArgument);
}

// The greedy kernel keeps each row's running key and CTA arrivals on the
// device between launches (no memset before a launch: greedy_rows.h) and
// writes the keys into the host's staging itself. A launch whose maximum is
// far above the next one's must leave nothing behind: the second step's
// token is its own, on either staging slot, and the first row of a launch
// of fewer rows is not the last launch's. Rows in order take no device
// parameters (greedy_rows.h), rows out of order do: both, in turn.
TEST(CudaDeviceSamplerTest, GreedyKernelLeavesNothingForTheNextLaunch) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  const int vocab = 5000, rows = 3;  // three CTAs a row
  auto sampler = cuda::DeviceSampler::Create(vocab, rows, true);
  ASSERT_TRUE(sampler.ok());
  auto device_logits = cuda::DeviceBuffer<float>::Allocate(static_cast<size_t>(rows) * vocab, "test logits");
  ASSERT_TRUE(device_logits.ok());
  const SamplingParams greedy{.temperature = 0.0f};
  for (int step = 0; step < 6; ++step) {
    // Step s: row r's maximum at id (997 s + 31 r + 7) % vocab, of 1e6 on even steps and 2 on odd ones.
    std::vector<float> logits(static_cast<size_t>(rows) * vocab, 0.0f);
    for (int r = 0; r < rows; ++r)
      logits[static_cast<size_t>(r) * vocab + (997 * step + 31 * r + 7) % vocab] = step % 2 == 0 ? 1e6f : 2.0f;
    ASSERT_EQ(cudaMemcpy(device_logits->data(), logits.data(), logits.size() * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    const int n = step == 5 ? 1 : rows;  // the last step samples only row 0
    // Odd steps list the rows backwards: the kernel then reads each row's
    // parameters from the device instead of taking row i as logits row i.
    auto logit_row_of = [&](int i) { return step % 2 == 1 ? n - 1 - i : i; };
    std::vector<DeviceSampleRow> sample_rows;
    for (int i = 0; i < n; ++i) sample_rows.push_back({.logit_row = logit_row_of(i), .params = &greedy});
    std::vector<SampledToken> got(static_cast<size_t>(n));
    const absl::Status st = sampler->Sample(device_logits->data(), 0, sample_rows, got, nullptr);
    ASSERT_TRUE(st.ok()) << st;
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(got[static_cast<size_t>(i)].token_id, (997 * step + 31 * logit_row_of(i) + 7) % vocab)
          << "step " << step << " sample row " << i;
    }
  }
}

TEST(CudaDeviceSamplerTest, ARowWithoutAFiniteLogitIsAnError) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  std::vector<float> logits(50, -INFINITY);
  auto device_logits = cuda::DeviceBuffer<float>::Allocate(logits.size(), "test logits");
  ASSERT_TRUE(device_logits.ok());
  ASSERT_EQ(cudaMemcpy(device_logits->data(), logits.data(), 200, cudaMemcpyHostToDevice), cudaSuccess);
  auto sampler = cuda::DeviceSampler::Create(50, 4);
  ASSERT_TRUE(sampler.ok());
  const SamplingParams greedy{.temperature = 0.0f};
  const DeviceSampleRow row{.logit_row = 0, .params = &greedy};
  SampledToken out[1];
  const absl::Status s = sampler->Sample(device_logits->data(), 0, {&row, 1}, out, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

// The host half of a device-sampler call (sample_edit_plan.h), without a
// device: which logits rows are edited and where their edits and bans go,
// which rows take the raw pass (one slot a logits row), and where a drawn
// token's raw logit comes from.
TEST(SampleEditPlanTest, ListsEditsBansAndRawPassesOnceALogitsRow) {
  constexpr int32_t kVocab = 1000;
  SamplingParams biased{.temperature = 0.0f, .logprobs = true, .top_logprobs = 2};
  biased.logit_bias = {{7, 3.0f}, {9, -2.0f}};
  const SamplingParams penalized{.temperature = 0.8f, .repetition_penalty = 1.3f, .logprobs = true, .n = 2};
  const SamplingParams banned{.temperature = 1.0f, .stop_token_ids = {4, 5, 6, 7, 8, 9, 10, 11, 12, 13},
                              .min_tokens = 5, .logprobs = true};
  const SamplingParams plain{.temperature = 0.0f, .logprobs = true};
  const SampleLogitEdits biased_edits(biased, nullptr, kVocab);
  const PromptTokenSet prompt(std::vector<int32_t>{3, 7, 11, 11, 20});
  SampleLogitEdits penalized_edits(penalized, &prompt, kVocab);
  penalized_edits.AddOutputToken(30);
  std::vector<int32_t> bans = {2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  // Logits rows 10 - 14 of a step whose pass starts at row 10.
  const std::vector<DeviceSampleRow> rows = {
      {.logit_row = 10, .params = &biased, .edits = &biased_edits},
      {.logit_row = 11, .params = &penalized, .sample_index = 0, .position = 1, .edits = &penalized_edits},
      {.logit_row = 11, .params = &penalized, .sample_index = 1, .position = 1, .edits = &penalized_edits},
      {.logit_row = 12, .params = &banned, .position = 3, .banned_ids = &bans},
      {.logit_row = 13, .params = &plain},
      {.logit_row = 14, .params = &banned, .position = 5, .banned_ids = &bans},  // the ban is over
  };
  cuda::SampleEditPlan plan;
  ASSERT_TRUE(plan.Build(10, rows).ok());
  const auto edit_rows = plan.edit_rows();
  ASSERT_EQ(edit_rows.size(), 3u);  // rows 10, 11 (once for both samples) and 12
  const int32_t biased_n = 2, penalized_n = static_cast<int32_t>(penalized_edits.edits().size());
  EXPECT_EQ(penalized_n, 5);  // the prompt's distinct 3, 7, 11, 20 and the output's 30
  EXPECT_EQ(edit_rows[0].logit_row, 0);
  EXPECT_EQ(edit_rows[0].first_edit, 0);
  EXPECT_EQ(edit_rows[0].num_edits, biased_n);
  EXPECT_EQ(edit_rows[0].num_bans, 0);
  EXPECT_EQ(edit_rows[1].logit_row, 1);
  EXPECT_EQ(edit_rows[1].first_edit, biased_n);
  EXPECT_EQ(edit_rows[1].num_edits, penalized_n);
  EXPECT_FLOAT_EQ(edit_rows[1].params.repetition_penalty, 1.3f);
  EXPECT_EQ(edit_rows[2].logit_row, 2);
  EXPECT_EQ(edit_rows[2].num_edits, 0);
  EXPECT_EQ(edit_rows[2].first_ban, 0);
  EXPECT_EQ(edit_rows[2].num_bans, 11);  // more than the sampling kernel's old 8
  EXPECT_EQ(plan.num_edits(), biased_n + penalized_n);
  EXPECT_EQ(plan.num_bans(), 11);
  // Raw passes: one for each edited logits row a logprobs row reads.
  EXPECT_EQ(plan.num_raw(), 3);
  EXPECT_EQ(std::vector<int32_t>(plan.raw_index().begin(), plan.raw_index().end()),
            (std::vector<int32_t>{0, 1, 1, 2, -1, -1}));
  // The edit kernel's lists.
  std::vector<LogitEdit> edits(static_cast<size_t>(plan.num_edits()));
  std::vector<int32_t> banned_ids(static_cast<size_t>(plan.num_bans()));
  plan.CopyEdits(edits.data(), banned_ids.data());
  for (int32_t j = 0; j < biased_n; ++j) EXPECT_EQ(edits[static_cast<size_t>(j)].token_id, biased_edits.edits()[j].token_id);
  for (int32_t j = 0; j < penalized_n; ++j)
    EXPECT_EQ(edits[static_cast<size_t>(biased_n + j)].token_id, penalized_edits.edits()[j].token_id);
  EXPECT_EQ(banned_ids, bans);
  // A drawn token's raw logit: the edit kernel's original when edited, else the row's value.
  std::vector<float> originals(edits.size());
  for (size_t j = 0; j < originals.size(); ++j) originals[j] = 100.0f + static_cast<float>(j);
  const int32_t nine = biased_edits.EditIndexOf(9), thirty = penalized_edits.EditIndexOf(30);
  ASSERT_GE(nine, 0);
  ASSERT_GE(thirty, 0);
  EXPECT_EQ(plan.RawLogitOf(rows[0], 9, -5.0f, originals), 100.0f + static_cast<float>(nine));
  EXPECT_EQ(plan.RawLogitOf(rows[0], 8, -5.0f, originals), -5.0f);  // untouched
  EXPECT_EQ(plan.RawLogitOf(rows[2], 30, 1.0f, originals), 100.0f + static_cast<float>(biased_n + thirty));
  EXPECT_EQ(plan.RawLogitOf(rows[3], 3, 2.5f, originals), 2.5f);  // bans only
  EXPECT_EQ(plan.RawLogitOf(rows[4], 3, std::nanf(""), originals), -INFINITY);
  // Forks of one logits row must edit it alike.
  std::vector<DeviceSampleRow> split = {rows[1], rows[2]};
  split[1].position = 2;
  const absl::Status differ = plan.Build(10, split);
  EXPECT_EQ(differ.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(differ.message().find("logits row 11"), std::string_view::npos) << differ;
  // A rebuild starts from nothing.
  ASSERT_TRUE(plan.Build(13, {&rows[4], 1}).ok());
  EXPECT_TRUE(plan.edit_rows().empty());
  EXPECT_EQ(plan.num_raw(), 0);
}

// ForwardAndSample on a real step: 4 sequences, one with logit_bias and
// logprobs (edited on the device, logprobs of the raw row), one with two
// samples of a biased row with logprobs.
class CudaForwardAndSampleTest : public ::testing::TestWithParam<int> {};

TEST_P(CudaForwardAndSampleTest, EveryRowMatchesTheHostSampler) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  auto model = LoadModel(TestDataDir() + "/dense_reference/gqa4_bf16_bias_untied_v515");
  ASSERT_TRUE(model.ok()) << model.status();
  auto gpu = CreateCudaBackend(**model, {.block_size = 4, .num_blocks = 64, .max_tokens_per_step = 64,
                                         .max_logit_rows = GetParam()});
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_TRUE((*gpu)->SupportsDeviceSampling());
  const int64_t vocab = (*gpu)->vocab_size();
  // Four prompts of 6 tokens, each a sequence of its own blocks; all rows want logits.
  std::vector<int32_t> tokens, pos, rows;
  std::vector<std::vector<int32_t>> tables;
  std::vector<SequenceSlice> seqs;
  for (int s = 0; s < 4; ++s) tables.push_back({2 * s, 2 * s + 1});
  for (int s = 0; s < 4; ++s) {
    seqs.push_back({static_cast<int32_t>(tokens.size()), 6, 0, tables[static_cast<size_t>(s)]});
    for (int i = 0; i < 6; ++i) {
      tokens.push_back(static_cast<int32_t>(3 + (i * 41 + s * 13) % (vocab - 3)));
      pos.push_back(i);
    }
    rows.push_back(static_cast<int32_t>(tokens.size()) - 1);
  }
  const StepBatch batch{tokens, pos, seqs, rows};
  std::vector<float> logits(rows.size() * static_cast<size_t>(vocab));
  ASSERT_TRUE((*gpu)->Forward(batch, logits).ok());

  SamplingParams greedy{.temperature = 0.0f, .logprobs = true, .top_logprobs = 3};
  SamplingParams nucleus{.temperature = 0.8f, .top_p = 0.8f, .seed = 42};
  // Two samples of one biased row with logprobs: one edit of the row, one raw pass for both.
  SamplingParams topk{.temperature = 1.0f, .top_k = 20, .seed = 43, .logprobs = true, .top_logprobs = 3, .n = 2};
  topk.logit_bias[11] = 2.0f;
  SamplingParams biased{.temperature = 0.9f, .seed = 44, .logprobs = true, .top_logprobs = 3};
  biased.logit_bias[7] = 3.0f;
  biased.logit_bias[11] = 25.0f;  // most draws: an edited token
  const SampleLogitEdits biased_edits(biased, nullptr, static_cast<int32_t>(vocab));
  const SampleLogitEdits topk_edits(topk, nullptr, static_cast<int32_t>(vocab));
  const std::vector<DeviceSampleRow> device_rows = {
      {.logit_row = 0, .params = &greedy, .seed = 1},
      {.logit_row = 1, .params = &nucleus, .seed = 42, .position = 5},
      {.logit_row = 2, .params = &biased, .seed = 44, .edits = &biased_edits},
      {.logit_row = 3, .params = &topk, .seed = 43, .sample_index = 0, .edits = &topk_edits},
      {.logit_row = 3, .params = &topk, .seed = 43, .sample_index = 1, .edits = &topk_edits}};
  std::vector<SampledToken> sampled(device_rows.size());
  const absl::Status s = (*gpu)->ForwardAndSample(batch, {device_rows}, sampled);
  ASSERT_TRUE(s.ok()) << s;

  auto host = Sampler::Create({.vocab_size = static_cast<int32_t>(vocab)});
  ASSERT_TRUE(host.ok());
  for (size_t i = 0; i < device_rows.size(); ++i) {
    SamplerRow row{.params = device_rows[i].params, .seed = device_rows[i].seed,
                   .sample_index = device_rows[i].sample_index};
    for (uint64_t k = 0; k < device_rows[i].position; ++k) row.output.Add(0);
    std::vector<float> one(logits.begin() + device_rows[i].logit_row * vocab,
                           logits.begin() + (device_rows[i].logit_row + 1) * vocab);
    const SamplerRow* ptr[] = {&row};
    auto want = host->Sample(one, ptr);
    ASSERT_TRUE(want.ok());
    EXPECT_EQ((*want)[0].token_id, sampled[i].token_id) << "device row " << i;
    ASSERT_EQ((*want)[0].logprob.has_value(), sampled[i].logprob.has_value()) << "device row " << i;
    if ((*want)[0].logprob) {
      EXPECT_NEAR(*(*want)[0].logprob, *sampled[i].logprob, 1e-3) << "device row " << i;
      ASSERT_EQ(sampled[i].top_logprobs.size(), 3u);
      for (size_t k = 0; k < 3; ++k)
        EXPECT_EQ((*want)[0].top_logprobs[k].token_id, sampled[i].top_logprobs[k].token_id);
    }
  }
  // A row with processors but without its edits is refused, naming the problem.
  const DeviceSampleRow bad[] = {{.logit_row = 2, .params = &biased}};
  SampledToken one_out[1];
  const absl::Status refused = (*gpu)->ForwardAndSample(batch, {bad}, one_out);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_NE(refused.message().find("edits"), std::string_view::npos) << refused;
}

// 8 logit rows per pass (one pass: the graph path) and 3 (passes of 3, 1).
INSTANTIATE_TEST_SUITE_P(LogitPasses, CudaForwardAndSampleTest, ::testing::Values(8, 3));

}  // namespace
}  // namespace ernie::testing
