#include "engine/backend/cuda/device_sampler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/sample/philox.h"
#include "engine/util/status_macros.h"

namespace ernie::cuda {

SampleRowParams MakeSampleRowParams(const DeviceSampleRow& row, int32_t first_logit_row) {
  const SamplingParams& p = *row.params;
  SampleRowParams out;
  out.logit_row = row.logit_row - first_logit_row;
  if (row.banned_ids != nullptr && row.position < static_cast<uint64_t>(p.min_tokens)) {
    for (int32_t id : *row.banned_ids)
      if (out.num_banned < 8) out.banned[out.num_banned++] = id;
  }
  out.greedy = IsGreedy(p) ? 1 : 0;
  out.logprobs = p.logprobs ? 1 : 0;
  out.top_logprobs = p.logprobs ? std::min(p.top_logprobs, kMaxDeviceTopLogprobs) : 0;
  if (!out.greedy) {
    out.uniform = SamplingUniform(row.seed, row.sample_index, row.position);
    out.inverse_temperature = 1.0f / p.temperature;
    out.top_k = p.top_k;
    out.top_p = p.top_p;
    out.min_p = p.min_p;
  }
  return out;
}

absl::StatusOr<DeviceSampler> DeviceSampler::Create(int64_t vocab_size, int64_t max_rows_per_launch) {
  if (vocab_size < 1 || vocab_size > (int64_t{1} << 30))
    return absl::InvalidArgumentError(absl::StrCat("device sampler: vocab_size ", vocab_size, " out of range"));
  if (max_rows_per_launch < 1)
    return absl::InvalidArgumentError("device sampler: max_rows_per_launch must be positive");
  DeviceSampler s;
  s.vocab_ = static_cast<int32_t>(vocab_size);
  s.max_rows_ = max_rows_per_launch;
  const auto n = static_cast<size_t>(max_rows_per_launch);
  ERNIE_ASSIGN_OR_RETURN(s.params_staging_, PinnedBuffer<SampleRowParams>::Allocate(n, "sampling parameter staging"));
  ERNIE_ASSIGN_OR_RETURN(s.params_, DeviceBuffer<SampleRowParams>::Allocate(n, "sampling parameters"));
  ERNIE_ASSIGN_OR_RETURN(s.results_, DeviceBuffer<SampleRowResult>::Allocate(n, "sampling results"));
  ERNIE_ASSIGN_OR_RETURN(s.results_staging_, PinnedBuffer<SampleRowResult>::Allocate(n, "sampling result staging"));
  return s;
}

absl::Status DeviceSampler::Sample(const float* logits, int32_t first_logit_row,
                                   std::span<const DeviceSampleRow> rows, std::span<SampledToken> out,
                                   cudaStream_t stream) {
  for (size_t begin = 0; begin < rows.size(); begin += static_cast<size_t>(max_rows_)) {
    const size_t n = std::min(rows.size() - begin, static_cast<size_t>(max_rows_));
    ERNIE_RETURN_IF_ERROR(SampleChunk(logits, first_logit_row, rows.subspan(begin, n), out.subspan(begin, n), stream));
  }
  return absl::OkStatus();
}

absl::Status DeviceSampler::SampleChunk(const float* logits, int32_t first_logit_row,
                                        std::span<const DeviceSampleRow> rows, std::span<SampledToken> out,
                                        cudaStream_t stream) {
  for (size_t i = 0; i < rows.size(); ++i) params_staging_.data()[i] = MakeSampleRowParams(rows[i], first_logit_row);
  ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(params_.data(), params_staging_.data(),
                                             rows.size() * sizeof(SampleRowParams), cudaMemcpyHostToDevice, stream),
                             "cudaMemcpyAsync of sampling parameters");
  ERNIE_CUDA_RETURN_IF_ERROR(LaunchSampleRows({.logits = logits,
                                               .rows = params_.data(),
                                               .results = results_.data(),
                                               .num_rows = static_cast<int32_t>(rows.size()),
                                               .vocab = vocab_},
                                              stream),
                             "sampling kernel launch");
  ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(results_staging_.data(), results_.data(),
                                             rows.size() * sizeof(SampleRowResult), cudaMemcpyDeviceToHost, stream),
                             "cudaMemcpyAsync of sampling results");
  // The staging buffers are reused by the next chunk, and the caller reads the results now.
  ERNIE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream), "sampling kernel");
  for (size_t i = 0; i < rows.size(); ++i) {
    const SampleRowResult& r = results_staging_.data()[i];
    const SamplingParams& p = *rows[i].params;
    if (r.token < 0 || r.token >= vocab_)
      return absl::InvalidArgumentError(absl::StrCat("logits row ", rows[i].logit_row,
                                                     " has no finite value (all -inf or NaN)"));
    SampledToken& t = out[i];
    t.token_id = r.token;
    t.logprob.reset();
    t.top_logprobs.clear();
    if (!p.logprobs) continue;
    t.logprob = r.logprob;
    const int k = std::min(p.top_logprobs, kMaxDeviceTopLogprobs);
    t.top_logprobs.reserve(static_cast<size_t>(k));
    for (int j = 0; j < k; ++j) t.top_logprobs.push_back({.token_id = r.top_ids[j], .logprob = r.top_logprobs[j]});
  }
  return absl::OkStatus();
}

}  // namespace ernie::cuda
