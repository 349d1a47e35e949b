#include "engine/backend/cuda/device_sampler.h"

#include <algorithm>
#include <type_traits>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/sample/logit_edit.h"
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

absl::Status DeviceSampler::EditRows(float* logits, int32_t first_logit_row, std::span<const DeviceSampleRow> rows,
                                     cudaStream_t stream) {
  edit_rows_host_.clear();
  std::vector<const SampleLogitEdits*> sources;  // whose edits each edit row applies
  size_t num_edits = 0;
  absl::flat_hash_map<int32_t, const DeviceSampleRow*> edited;  // logits row -> the row that edits it
  for (const DeviceSampleRow& row : rows) {
    if (row.edits == nullptr) continue;
    auto [it, first] = edited.try_emplace(row.logit_row, &row);
    if (!first) {
      // An n > 1 fork: its samples read one row, with the same processors.
      const DeviceSampleRow& owner = *it->second;
      if (owner.params != row.params || owner.position != row.position)
        return absl::InvalidArgumentError(absl::StrCat("device sampling: rows of logits row ", row.logit_row,
                                                       " would edit it differently"));
      continue;
    }
    const auto count = static_cast<int32_t>(row.edits->edits().size());
    if (count == 0) continue;
    edit_rows_host_.push_back({.logit_row = row.logit_row - first_logit_row,
                               .first_edit = static_cast<int32_t>(num_edits),
                               .num_edits = count,
                               .params = row.edits->params()});
    sources.push_back(row.edits);
    num_edits += static_cast<size_t>(count);
  }
  if (edit_rows_host_.empty()) return absl::OkStatus();
  // Grown to what this call needs, doubled so that growth is rare. The
  // previous call's copies finished before it returned (it synchronised).
  auto reserve = [](auto& staging, auto& device, size_t n, const char* what) -> absl::Status {
    if (device.size() >= n) return absl::OkStatus();
    using T = std::remove_pointer_t<decltype(device.data())>;
    const size_t capacity = std::max<size_t>(2 * device.size(), n);
    ERNIE_ASSIGN_OR_RETURN(staging, PinnedBuffer<T>::Allocate(capacity, absl::StrCat(what, " staging")));
    ERNIE_ASSIGN_OR_RETURN(device, DeviceBuffer<T>::Allocate(capacity, what));
    return absl::OkStatus();
  };
  ERNIE_RETURN_IF_ERROR(reserve(edit_rows_staging_, edit_rows_, edit_rows_host_.size(), "logit edit rows"));
  ERNIE_RETURN_IF_ERROR(reserve(edits_staging_, edits_, num_edits, "logit edits"));
  std::copy(edit_rows_host_.begin(), edit_rows_host_.end(), edit_rows_staging_.data());
  for (size_t i = 0; i < edit_rows_host_.size(); ++i) {
    const auto e = sources[i]->edits();
    std::copy(e.begin(), e.end(), edits_staging_.data() + edit_rows_host_[i].first_edit);
  }
  ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(edit_rows_.data(), edit_rows_staging_.data(),
                                             edit_rows_host_.size() * sizeof(LogitEditRow), cudaMemcpyHostToDevice,
                                             stream),
                             "cudaMemcpyAsync of logit edit rows");
  ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(edits_.data(), edits_staging_.data(), num_edits * sizeof(LogitEdit),
                                             cudaMemcpyHostToDevice, stream),
                             "cudaMemcpyAsync of logit edits");
  ERNIE_CUDA_RETURN_IF_ERROR(LaunchLogitEdits({.logits = logits,
                                               .vocab = vocab_,
                                               .rows = edit_rows_.data(),
                                               .num_rows = static_cast<int32_t>(edit_rows_host_.size()),
                                               .edits = edits_.data()},
                                              stream),
                             "logit edits kernel launch");
  return absl::OkStatus();
}

absl::Status DeviceSampler::Sample(float* logits, int32_t first_logit_row, std::span<const DeviceSampleRow> rows,
                                   std::span<SampledToken> out, cudaStream_t stream) {
  ERNIE_RETURN_IF_ERROR(EditRows(logits, first_logit_row, rows, stream));
  for (size_t begin = 0; begin < rows.size(); begin += static_cast<size_t>(max_rows_)) {
    const size_t n = std::min(rows.size() - begin, static_cast<size_t>(max_rows_));
    ERNIE_RETURN_IF_ERROR(SampleChunk(logits, first_logit_row, rows.subspan(begin, n), out.subspan(begin, n), stream));
  }
  return absl::OkStatus();
}

absl::Status DeviceSampler::SampleChunk(const float* logits, int32_t first_logit_row,
                                        std::span<const DeviceSampleRow> rows, std::span<SampledToken> out,
                                        cudaStream_t stream) {
  size_t fast = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    SampleRowParams& params = params_staging_.data()[i];
    params = MakeSampleRowParams(rows[i], first_logit_row);
    params.fast_greedy = fast_greedy_ && params.greedy && !params.logprobs && params.num_banned == 0 ? 1 : 0;
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
  // The staging buffers are reused by the next chunk, and the caller reads the results now.
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
    t.logprob = r.logprob;
    const int k = std::min(p.top_logprobs, kMaxDeviceTopLogprobs);
    t.top_logprobs.reserve(static_cast<size_t>(k));
    for (int j = 0; j < k; ++j) t.top_logprobs.push_back({.token_id = r.top_ids[j], .logprob = r.top_logprobs[j]});
  }
  return absl::OkStatus();
}

}  // namespace ernie::cuda
