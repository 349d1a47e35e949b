#include "engine/backend/cuda/device_sampler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/sample/logit_edit.h"
#include "engine/sample/philox.h"
#include "engine/util/status_macros.h"

namespace ernie::cuda {

namespace {

// Grows a staging / device buffer pair to at least n, doubling so that
// growth is rare. The previous call's copies finished before it returned (it
// synchronised), so the old buffers are free.
template <typename T>
absl::Status Reserve(PinnedBuffer<T>& staging, DeviceBuffer<T>& device, size_t n, const char* what) {
  if (device.size() >= n) return absl::OkStatus();
  const size_t capacity = std::max<size_t>(2 * device.size(), n);
  ERNIE_ASSIGN_OR_RETURN(staging, PinnedBuffer<T>::Allocate(capacity, absl::StrCat(what, " staging")));
  ERNIE_ASSIGN_OR_RETURN(device, DeviceBuffer<T>::Allocate(capacity, what));
  return absl::OkStatus();
}

}  // namespace

SampleRowParams MakeSampleRowParams(const DeviceSampleRow& row, int32_t first_logit_row) {
  const SamplingParams& p = *row.params;
  SampleRowParams out;
  out.logit_row = row.logit_row - first_logit_row;
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

absl::StatusOr<DeviceSampler> DeviceSampler::Create(int64_t vocab_size, int64_t max_rows_per_launch,
                                                    bool fast_greedy) {
  if (vocab_size < 1 || vocab_size > (int64_t{1} << 30))
    return absl::InvalidArgumentError(absl::StrCat("device sampler: vocab_size ", vocab_size, " out of range"));
  if (max_rows_per_launch < 1)
    return absl::InvalidArgumentError("device sampler: max_rows_per_launch must be positive");
  DeviceSampler s;
  s.vocab_ = static_cast<int32_t>(vocab_size);
  s.max_rows_ = max_rows_per_launch;
  s.fast_greedy_ = fast_greedy;
  const auto n = static_cast<size_t>(max_rows_per_launch);
  ERNIE_ASSIGN_OR_RETURN(s.params_staging_, PinnedBuffer<SampleRowParams>::Allocate(n, "sampling parameter staging"));
  ERNIE_ASSIGN_OR_RETURN(s.params_, DeviceBuffer<SampleRowParams>::Allocate(n, "sampling parameters"));
  ERNIE_ASSIGN_OR_RETURN(s.results_, DeviceBuffer<SampleRowResult>::Allocate(n, "sampling results"));
  ERNIE_ASSIGN_OR_RETURN(s.results_staging_, PinnedBuffer<SampleRowResult>::Allocate(n, "sampling result staging"));
  ERNIE_ASSIGN_OR_RETURN(s.greedy_keys_, DeviceBuffer<unsigned long long>::Allocate(n, "greedy argmax keys"));
  ERNIE_ASSIGN_OR_RETURN(s.greedy_keys_staging_,
                         PinnedBuffer<unsigned long long>::Allocate(n, "greedy argmax key staging"));
  return s;
}

absl::Status DeviceSampler::LaunchRawPass(const float* logits, int32_t first_logit_row,
                                          std::span<const DeviceSampleRow> rows, cudaStream_t stream) {
  if (plan_.num_raw() == 0) return absl::OkStatus();
  const auto n = static_cast<size_t>(plan_.num_raw());
  const auto raw_index = plan_.raw_index();
  ERNIE_RETURN_IF_ERROR(Reserve(raw_params_staging_, raw_params_, n, "raw-pass parameters"));
  if (raw_results_.size() < n) {
    ERNIE_ASSIGN_OR_RETURN(raw_results_, DeviceBuffer<SampleRowResult>::Allocate(raw_params_.size(), "raw-pass results"));
    ERNIE_ASSIGN_OR_RETURN(raw_results_staging_,
                           PinnedBuffer<SampleRowResult>::Allocate(raw_params_.size(), "raw-pass result staging"));
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    if (raw_index[i] < 0) continue;  // a fork's samples write their shared slot alike
    SampleRowParams& params = raw_params_staging_.data()[raw_index[i]];
    params = MakeSampleRowParams(rows[i], first_logit_row);
    params.greedy = 1;  // no draw: the raw argmax is the log-normalizer's maximum
    params.stats_only = 1;
  }
  ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(raw_params_.data(), raw_params_staging_.data(),
                                             n * sizeof(SampleRowParams), cudaMemcpyHostToDevice, stream),
                             "cudaMemcpyAsync of raw-pass parameters");
  ERNIE_CUDA_RETURN_IF_ERROR(LaunchSampleRows({.logits = logits,
                                               .rows = raw_params_.data(),
                                               .results = raw_results_.data(),
                                               .num_rows = plan_.num_raw(),
                                               .vocab = vocab_},
                                              stream),
                             "raw-pass sampling kernel launch");
  ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(raw_results_staging_.data(), raw_results_.data(),
                                             n * sizeof(SampleRowResult), cudaMemcpyDeviceToHost, stream),
                             "cudaMemcpyAsync of raw-pass results");
  return absl::OkStatus();
}

absl::Status DeviceSampler::LaunchEdits(float* logits, cudaStream_t stream) {
  const auto rows = plan_.edit_rows();
  if (rows.empty()) return absl::OkStatus();
  const auto edits = static_cast<size_t>(plan_.num_edits()), bans = static_cast<size_t>(plan_.num_bans());
  ERNIE_RETURN_IF_ERROR(Reserve(edit_rows_staging_, edit_rows_, rows.size(), "logit edit rows"));
  if (edits > 0) ERNIE_RETURN_IF_ERROR(Reserve(edits_staging_, edits_, edits, "logit edits"));
  if (bans > 0) ERNIE_RETURN_IF_ERROR(Reserve(bans_staging_, bans_, bans, "banned ids"));
  const bool keep_originals = plan_.num_raw() > 0 && edits > 0;
  if (keep_originals) ERNIE_RETURN_IF_ERROR(Reserve(originals_staging_, originals_, edits, "edited logits"));
  std::copy(rows.begin(), rows.end(), edit_rows_staging_.data());
  plan_.CopyEdits(edits_staging_.data(), bans_staging_.data());
  ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(edit_rows_.data(), edit_rows_staging_.data(),
                                             rows.size() * sizeof(LogitEditRow), cudaMemcpyHostToDevice,
                                             stream),
                             "cudaMemcpyAsync of logit edit rows");
  if (edits > 0)
    ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(edits_.data(), edits_staging_.data(), edits * sizeof(LogitEdit),
                                               cudaMemcpyHostToDevice, stream),
                               "cudaMemcpyAsync of logit edits");
  if (bans > 0)
    ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(bans_.data(), bans_staging_.data(), bans * sizeof(int32_t),
                                               cudaMemcpyHostToDevice, stream),
                               "cudaMemcpyAsync of banned ids");
  ERNIE_CUDA_RETURN_IF_ERROR(LaunchLogitEdits({.logits = logits,
                                               .vocab = vocab_,
                                               .rows = edit_rows_.data(),
                                               .num_rows = static_cast<int32_t>(rows.size()),
                                               .edits = edits > 0 ? edits_.data() : nullptr,
                                               .bans = bans > 0 ? bans_.data() : nullptr,
                                               .originals = keep_originals ? originals_.data() : nullptr},
                                              stream),
                             "logit edits kernel launch");
  if (keep_originals)
    ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(originals_staging_.data(), originals_.data(), edits * sizeof(float),
                                               cudaMemcpyDeviceToHost, stream),
                               "cudaMemcpyAsync of edited logits");
  return absl::OkStatus();
}

absl::Status DeviceSampler::Sample(float* logits, int32_t first_logit_row, std::span<const DeviceSampleRow> rows,
                                   std::span<SampledToken> out, cudaStream_t stream) {
  ERNIE_RETURN_IF_ERROR(plan_.Build(first_logit_row, rows));
  ERNIE_RETURN_IF_ERROR(LaunchRawPass(logits, first_logit_row, rows, stream));
  ERNIE_RETURN_IF_ERROR(LaunchEdits(logits, stream));
  for (size_t begin = 0; begin < rows.size(); begin += static_cast<size_t>(max_rows_)) {
    const size_t n = std::min(rows.size() - begin, static_cast<size_t>(max_rows_));
    ERNIE_RETURN_IF_ERROR(SampleChunk(logits, first_logit_row, rows.subspan(begin, n),
                                      plan_.raw_index().subspan(begin, n), out.subspan(begin, n),
                                      stream));
  }
  return absl::OkStatus();
}

void DeviceSampler::FinishRawRow(const DeviceSampleRow& row, const SampleRowResult& raw, const SampleRowResult& drawn,
                                 SampledToken& out) const {
  const float raw_logit = plan_.RawLogitOf(
      row, drawn.token, drawn.token_logit,
      std::span<const float>(originals_staging_.data(), static_cast<size_t>(plan_.num_edits())));
  out.logprob = raw_logit - raw.log_normalizer;  // the kernel's __fsub_rn, the host Sampler's subtraction
  const int k = std::min(row.params->top_logprobs, kMaxDeviceTopLogprobs);
  out.top_logprobs.reserve(static_cast<size_t>(k));
  for (int j = 0; j < k; ++j) out.top_logprobs.push_back({.token_id = raw.top_ids[j], .logprob = raw.top_logprobs[j]});
}

absl::Status DeviceSampler::SampleChunk(const float* logits, int32_t first_logit_row,
                                        std::span<const DeviceSampleRow> rows, std::span<const int32_t> raw_index,
                                        std::span<SampledToken> out, cudaStream_t stream) {
  size_t fast = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    SampleRowParams& params = params_staging_.data()[i];
    params = MakeSampleRowParams(rows[i], first_logit_row);
    params.fast_greedy = fast_greedy_ && params.greedy && !params.logprobs ? 1 : 0;
    if (raw_index[i] >= 0) params.logprobs = params.top_logprobs = 0;  // the raw pass's
    fast += static_cast<size_t>(params.fast_greedy);
  }
  const auto n = static_cast<int32_t>(rows.size());
  ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(params_.data(), params_staging_.data(),
                                             rows.size() * sizeof(SampleRowParams), cudaMemcpyHostToDevice, stream),
                             "cudaMemcpyAsync of sampling parameters");
  if (fast > 0) {
    ERNIE_CUDA_RETURN_IF_ERROR(LaunchGreedyRows({.logits = logits, .rows = params_.data(), .num_rows = n,
                                                 .vocab = vocab_, .keys = greedy_keys_.data()},
                                                stream),
                               "greedy kernel launch");
    ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(greedy_keys_staging_.data(), greedy_keys_.data(),
                                               rows.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost,
                                               stream),
                               "cudaMemcpyAsync of greedy keys");
  }
  if (fast < rows.size()) {
    ERNIE_CUDA_RETURN_IF_ERROR(LaunchSampleRows({.logits = logits,
                                                 .rows = params_.data(),
                                                 .results = results_.data(),
                                                 .num_rows = n,
                                                 .vocab = vocab_},
                                                stream),
                               "sampling kernel launch");
    ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(results_staging_.data(), results_.data(),
                                               rows.size() * sizeof(SampleRowResult), cudaMemcpyDeviceToHost, stream),
                               "cudaMemcpyAsync of sampling results");
  }
  // The staging buffers are reused by the next chunk, and the caller reads
  // the results now (the raw pass's and the edited logits' copies, enqueued
  // before, are done too).
  ERNIE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream), "sampling kernel");
  for (size_t i = 0; i < rows.size(); ++i) {
    SampleRowResult& r = results_staging_.data()[i];
    if (params_staging_.data()[i].fast_greedy) r.token = GreedyTokenOfKey(greedy_keys_staging_.data()[i]);
    const SamplingParams& p = *rows[i].params;
    if (r.token < 0 || r.token >= vocab_)
      return absl::InvalidArgumentError(absl::StrCat("logits row ", rows[i].logit_row,
                                                     " has no finite value (all -inf or NaN)"));
    SampledToken& t = out[i];
    t.token_id = r.token;
    t.logprob.reset();
    t.top_logprobs.clear();
    if (!p.logprobs) continue;
    if (raw_index[i] >= 0) {
      const SampleRowResult& raw = raw_results_staging_.data()[raw_index[i]];
      if (raw.token < 0 || raw.token >= vocab_)  // as the host Sampler: a raw row without a finite logit
        return absl::InvalidArgumentError(absl::StrCat("logits row ", rows[i].logit_row,
                                                       " has no finite value (all -inf or NaN)"));
      FinishRawRow(rows[i], raw, r, t);
      continue;
    }
    t.logprob = r.logprob;
    const int k = std::min(p.top_logprobs, kMaxDeviceTopLogprobs);
    t.top_logprobs.reserve(static_cast<size_t>(k));
    for (int j = 0; j < k; ++j) t.top_logprobs.push_back({.token_id = r.top_ids[j], .logprob = r.top_logprobs[j]});
  }
  return absl::OkStatus();
}

}  // namespace ernie::cuda
