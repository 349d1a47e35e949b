#include "engine/backend/cuda/device_sampler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/sample/logit_edit.h"
#include "engine/sample/philox.h"
#include "engine/util/status_macros.h"

namespace ernie::cuda {

namespace {

// Grows a device buffer to at least n, doubling so that growth is rare.
// cudaFree waits for the device, so work still reading the old one is done.
template <typename T>
absl::Status ReserveDevice(DeviceBuffer<T>& device, size_t n, const char* what) {
  if (device.size() >= n) return absl::OkStatus();
  ERNIE_ASSIGN_OR_RETURN(device, DeviceBuffer<T>::Allocate(std::max<size_t>(2 * device.size(), n), what));
  return absl::OkStatus();
}

// The same for a staging slot's page-locked buffer: its slot's previous call
// is finished (NextSlot), so nothing reads it.
template <typename T>
absl::Status ReservePinned(PinnedBuffer<T>& staging, size_t n, const char* what) {
  if (staging.size() >= n) return absl::OkStatus();
  ERNIE_ASSIGN_OR_RETURN(staging, PinnedBuffer<T>::Allocate(std::max<size_t>(2 * staging.size(), n),
                                                            absl::StrCat(what, " staging")));
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
  ERNIE_ASSIGN_OR_RETURN(s.params_, DeviceBuffer<SampleRowParams>::Allocate(n, "sampling parameters"));
  ERNIE_ASSIGN_OR_RETURN(s.results_, DeviceBuffer<SampleRowResult>::Allocate(n, "sampling results"));
  ERNIE_ASSIGN_OR_RETURN(s.greedy_keys_, DeviceBuffer<unsigned long long>::Allocate(n, "greedy argmax keys"));
  ERNIE_ASSIGN_OR_RETURN(s.greedy_running_, DeviceBuffer<unsigned long long>::Allocate(n, "greedy running keys"));
  ERNIE_ASSIGN_OR_RETURN(s.greedy_arrivals_, DeviceBuffer<uint32_t>::Allocate(n, "greedy arrivals"));
  ERNIE_CUDA_RETURN_IF_ERROR(cudaMemset(s.greedy_running_.data(), 0, s.greedy_running_.bytes()),
                             "cudaMemset of greedy running keys");
  ERNIE_CUDA_RETURN_IF_ERROR(cudaMemset(s.greedy_arrivals_.data(), 0, s.greedy_arrivals_.bytes()),
                             "cudaMemset of greedy arrivals");
  for (Staging& slot : s.staging_) {
    ERNIE_ASSIGN_OR_RETURN(slot.params, PinnedBuffer<SampleRowParams>::Allocate(n, "sampling parameter staging"));
    ERNIE_ASSIGN_OR_RETURN(slot.results, PinnedBuffer<SampleRowResult>::Allocate(n, "sampling result staging"));
    ERNIE_ASSIGN_OR_RETURN(slot.greedy_keys, PinnedBuffer<unsigned long long>::Allocate(n, "greedy argmax key staging"));
    // Page-locked memory is mapped for the device wherever it has unified
    // addressing (every 64-bit Linux device); elsewhere the keys are copied.
    void* mapped = nullptr;
    if (cudaHostGetDevicePointer(&mapped, slot.greedy_keys.data(), 0) == cudaSuccess) {
      slot.greedy_keys_on_device = static_cast<unsigned long long*>(mapped);
    } else {
      (void)cudaGetLastError();  // not sticky: the copy takes over
    }
  }
  return s;
}

int64_t DeviceSampler::bytes() const {
  return static_cast<int64_t>(params_.bytes() + results_.bytes() + greedy_keys_.bytes() + greedy_running_.bytes() +
                              greedy_arrivals_.bytes() + edit_rows_.bytes() +
                              edits_.bytes() + bans_.bytes() + originals_.bytes() + raw_params_.bytes() +
                              raw_results_.bytes());
}

absl::StatusOr<DeviceSampler::Staging*> DeviceSampler::NextSlot() {
  current_ ^= 1;
  Staging& slot = staging_[current_];
  if (slot.pending)
    return absl::FailedPreconditionError("device sampler: a call two back was enqueued and never finished");
  return &slot;
}

absl::Status DeviceSampler::LaunchRawPass(Staging& slot, const float* logits, int32_t first_logit_row,
                                          std::span<const DeviceSampleRow> rows, cudaStream_t stream) {
  if (slot.plan.num_raw() == 0) return absl::OkStatus();
  const auto n = static_cast<size_t>(slot.plan.num_raw());
  const auto raw_index = slot.plan.raw_index();
  ERNIE_RETURN_IF_ERROR(ReserveDevice(raw_params_, n, "raw-pass parameters"));
  ERNIE_RETURN_IF_ERROR(ReserveDevice(raw_results_, n, "raw-pass results"));
  ERNIE_RETURN_IF_ERROR(ReservePinned(slot.raw_params, n, "raw-pass parameters"));
  ERNIE_RETURN_IF_ERROR(ReservePinned(slot.raw_results, n, "raw-pass results"));
  for (size_t i = 0; i < rows.size(); ++i) {
    if (raw_index[i] < 0) continue;  // a fork's samples write their shared slot alike
    SampleRowParams& params = slot.raw_params.data()[raw_index[i]];
    params = MakeSampleRowParams(rows[i], first_logit_row);
    params.greedy = 1;  // no draw: the raw argmax is the log-normalizer's maximum
    params.stats_only = 1;
  }
  ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(raw_params_.data(), slot.raw_params.data(),
                                             n * sizeof(SampleRowParams), cudaMemcpyHostToDevice, stream),
                             "cudaMemcpyAsync of raw-pass parameters");
  ERNIE_CUDA_RETURN_IF_ERROR(LaunchSampleRows({.logits = logits,
                                               .rows = raw_params_.data(),
                                               .results = raw_results_.data(),
                                               .num_rows = slot.plan.num_raw(),
                                               .vocab = vocab_},
                                              stream),
                             "raw-pass sampling kernel launch");
  ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slot.raw_results.data(), raw_results_.data(),
                                             n * sizeof(SampleRowResult), cudaMemcpyDeviceToHost, stream),
                             "cudaMemcpyAsync of raw-pass results");
  return absl::OkStatus();
}

absl::Status DeviceSampler::LaunchEdits(Staging& slot, float* logits, cudaStream_t stream) {
  const auto rows = slot.plan.edit_rows();
  if (rows.empty()) return absl::OkStatus();
  const auto edits = static_cast<size_t>(slot.plan.num_edits()), bans = static_cast<size_t>(slot.plan.num_bans());
  ERNIE_RETURN_IF_ERROR(ReserveDevice(edit_rows_, rows.size(), "logit edit rows"));
  ERNIE_RETURN_IF_ERROR(ReservePinned(slot.edit_rows, rows.size(), "logit edit rows"));
  if (edits > 0) {
    ERNIE_RETURN_IF_ERROR(ReserveDevice(edits_, edits, "logit edits"));
    ERNIE_RETURN_IF_ERROR(ReservePinned(slot.edits, edits, "logit edits"));
  }
  if (bans > 0) {
    ERNIE_RETURN_IF_ERROR(ReserveDevice(bans_, bans, "banned ids"));
    ERNIE_RETURN_IF_ERROR(ReservePinned(slot.bans, bans, "banned ids"));
  }
  const bool keep_originals = slot.plan.num_raw() > 0 && edits > 0;
  if (keep_originals) {
    ERNIE_RETURN_IF_ERROR(ReserveDevice(originals_, edits, "edited logits"));
    ERNIE_RETURN_IF_ERROR(ReservePinned(slot.originals, edits, "edited logits"));
  }
  std::copy(rows.begin(), rows.end(), slot.edit_rows.data());
  slot.plan.CopyEdits(slot.edits.data(), slot.bans.data());
  ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(edit_rows_.data(), slot.edit_rows.data(),
                                             rows.size() * sizeof(LogitEditRow), cudaMemcpyHostToDevice,
                                             stream),
                             "cudaMemcpyAsync of logit edit rows");
  if (edits > 0)
    ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(edits_.data(), slot.edits.data(), edits * sizeof(LogitEdit),
                                               cudaMemcpyHostToDevice, stream),
                               "cudaMemcpyAsync of logit edits");
  if (bans > 0)
    ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(bans_.data(), slot.bans.data(), bans * sizeof(int32_t),
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
    ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slot.originals.data(), originals_.data(), edits * sizeof(float),
                                               cudaMemcpyDeviceToHost, stream),
                               "cudaMemcpyAsync of edited logits");
  return absl::OkStatus();
}

absl::Status DeviceSampler::Sample(float* logits, int32_t first_logit_row, std::span<const DeviceSampleRow> rows,
                                   std::span<SampledToken> out, cudaStream_t stream) {
  ERNIE_ASSIGN_OR_RETURN(Staging* slot, NextSlot());
  ERNIE_RETURN_IF_ERROR(slot->plan.Build(first_logit_row, rows));
  ERNIE_RETURN_IF_ERROR(LaunchRawPass(*slot, logits, first_logit_row, rows, stream));
  ERNIE_RETURN_IF_ERROR(LaunchEdits(*slot, logits, stream));
  for (size_t begin = 0; begin < rows.size(); begin += static_cast<size_t>(max_rows_)) {
    const size_t n = std::min(rows.size() - begin, static_cast<size_t>(max_rows_));
    const auto raw_index = slot->plan.raw_index().subspan(begin, n);
    ERNIE_RETURN_IF_ERROR(LaunchChunk(*slot, logits, first_logit_row, rows.subspan(begin, n), raw_index, stream));
    // The slot is reused by the next launch, and the results are read now
    // (the raw pass's and the edited logits' copies, enqueued before, are done too).
    ERNIE_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream), "sampling kernel");
    ERNIE_RETURN_IF_ERROR(ReadChunk(*slot, rows.subspan(begin, n), raw_index, out.subspan(begin, n)));
  }
  return absl::OkStatus();
}

bool DeviceSampler::CanEnqueue(std::span<const DeviceSampleRow> rows) const {
  if (static_cast<int64_t>(rows.size()) > max_rows_) return false;
  // A raw pass (logprobs of a row that is edited or banned) reads its row's
  // edits back after the launch: Sample's.
  for (const DeviceSampleRow& row : rows) {
    if (!row.params->logprobs) continue;
    const bool banning = row.position < static_cast<uint64_t>(row.params->min_tokens);
    if (banning || (row.edits != nullptr && !row.edits->edits().empty())) return false;
  }
  return true;
}

absl::Status DeviceSampler::Enqueue(float* logits, int32_t first_logit_row, std::span<const DeviceSampleRow> rows,
                                    cudaStream_t stream) {
  if (!CanEnqueue(rows))
    return absl::InvalidArgumentError("device sampler: these rows need Sample (too many, or a raw pass)");
  ERNIE_ASSIGN_OR_RETURN(Staging* slot, NextSlot());
  ERNIE_RETURN_IF_ERROR(slot->plan.Build(first_logit_row, rows));
  if (slot->plan.num_raw() != 0) return absl::InternalError("device sampler: an enqueued row has a raw pass");
  ERNIE_RETURN_IF_ERROR(LaunchEdits(*slot, logits, stream));
  ERNIE_RETURN_IF_ERROR(LaunchChunk(*slot, logits, first_logit_row, rows, slot->plan.raw_index(), stream));
  slot->pending = true;
  return absl::OkStatus();
}

absl::Status DeviceSampler::Finish(std::span<SampledToken> out) {
  // The oldest pending slot: the current one unless the other is pending too.
  Staging& other = staging_[current_ ^ 1];
  Staging& slot = other.pending ? other : staging_[current_];
  if (!slot.pending) return absl::FailedPreconditionError("device sampler: nothing enqueued to finish");
  slot.pending = false;
  if (out.size() != slot.read_back.size())
    return absl::InvalidArgumentError(absl::StrCat("device sampler: ", slot.read_back.size(),
                                                   " rows enqueued, room for ", out.size()));
  return ReadChunk(slot, {}, slot.plan.raw_index(), out);
}

void DeviceSampler::FinishRawRow(const Staging& slot, const DeviceSampleRow& row, const SampleRowResult& raw,
                                 const SampleRowResult& drawn, SampledToken& out) const {
  const float raw_logit = slot.plan.RawLogitOf(
      row, drawn.token, drawn.token_logit,
      std::span<const float>(slot.originals.data(), static_cast<size_t>(slot.plan.num_edits())));
  out.logprob = raw_logit - raw.log_normalizer;  // the kernel's __fsub_rn, the host Sampler's subtraction
  const int k = std::min(row.params->top_logprobs, kMaxDeviceTopLogprobs);
  out.top_logprobs.reserve(static_cast<size_t>(k));
  for (int j = 0; j < k; ++j) out.top_logprobs.push_back({.token_id = raw.top_ids[j], .logprob = raw.top_logprobs[j]});
}

absl::Status DeviceSampler::LaunchChunk(Staging& slot, const float* logits, int32_t first_logit_row,
                                        std::span<const DeviceSampleRow> rows, std::span<const int32_t> raw_index,
                                        cudaStream_t stream) {
  size_t fast = 0;
  slot.read_back.clear();
  for (size_t i = 0; i < rows.size(); ++i) {
    SampleRowParams& params = slot.params.data()[i];
    params = MakeSampleRowParams(rows[i], first_logit_row);
    params.fast_greedy = fast_greedy_ && params.greedy && !params.logprobs ? 1 : 0;
    if (raw_index[i] >= 0) params.logprobs = params.top_logprobs = 0;  // the raw pass's
    fast += static_cast<size_t>(params.fast_greedy);
    const SamplingParams& p = *rows[i].params;
    slot.read_back.push_back({.logit_row = rows[i].logit_row,
                              .top_logprobs = std::min(p.top_logprobs, kMaxDeviceTopLogprobs),
                              .logprobs = p.logprobs});
  }
  const auto n = static_cast<int32_t>(rows.size());
  // A launch of fast rows only, row i reading logits row first + i (a decode
  // step's greedy rows), gives the greedy kernel nothing to read from the
  // device's parameters: they are not uploaded.
  const int32_t first = rows.empty() ? 0 : slot.params.data()[0].logit_row;
  bool consecutive_fast = fast == rows.size();
  for (size_t i = 0; consecutive_fast && i < rows.size(); ++i)
    consecutive_fast = slot.params.data()[i].logit_row == first + static_cast<int32_t>(i);
  if (!consecutive_fast)
    ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(params_.data(), slot.params.data(),
                                               rows.size() * sizeof(SampleRowParams), cudaMemcpyHostToDevice, stream),
                               "cudaMemcpyAsync of sampling parameters");
  if (fast > 0) {
    ERNIE_CUDA_RETURN_IF_ERROR(LaunchGreedyRows({.logits = consecutive_fast ? logits + int64_t{first} * vocab_ : logits,
                                                 .rows = consecutive_fast ? nullptr : params_.data(),
                                                 .num_rows = n,
                                                 .vocab = vocab_,
                                                 .keys = slot.greedy_keys_on_device != nullptr
                                                             ? slot.greedy_keys_on_device
                                                             : greedy_keys_.data(),
                                                 .results = results_.data(),
                                                 .running = greedy_running_.data(),
                                                 .arrivals = greedy_arrivals_.data()},
                                                stream),
                               "greedy kernel launch");
    if (slot.greedy_keys_on_device == nullptr)
      ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slot.greedy_keys.data(), greedy_keys_.data(),
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
    ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(slot.results.data(), results_.data(),
                                               rows.size() * sizeof(SampleRowResult), cudaMemcpyDeviceToHost, stream),
                               "cudaMemcpyAsync of sampling results");
  }
  return absl::OkStatus();
}

absl::Status DeviceSampler::ReadChunk(const Staging& slot, std::span<const DeviceSampleRow> rows,
                                      std::span<const int32_t> raw_index, std::span<SampledToken> out) const {
  for (size_t i = 0; i < slot.read_back.size(); ++i) {
    const RowReadBack& back = slot.read_back[i];
    SampleRowResult r = slot.results.data()[i];
    if (slot.params.data()[i].fast_greedy) r.token = GreedyTokenOfKey(slot.greedy_keys.data()[i]);
    if (r.token < 0 || r.token >= vocab_)
      return absl::InvalidArgumentError(absl::StrCat("logits row ", back.logit_row,
                                                     " has no finite value (all -inf or NaN)"));
    SampledToken& t = out[i];
    t.token_id = r.token;
    t.logprob.reset();
    t.top_logprobs.clear();
    if (!back.logprobs) continue;
    if (raw_index[i] >= 0) {  // only Sample's rows
      const SampleRowResult& raw = slot.raw_results.data()[raw_index[i]];
      if (raw.token < 0 || raw.token >= vocab_)  // as the host Sampler: a raw row without a finite logit
        return absl::InvalidArgumentError(absl::StrCat("logits row ", back.logit_row,
                                                       " has no finite value (all -inf or NaN)"));
      FinishRawRow(slot, rows[i], raw, r, t);
      continue;
    }
    t.logprob = r.logprob;
    t.top_logprobs.reserve(static_cast<size_t>(back.top_logprobs));
    for (int j = 0; j < back.top_logprobs; ++j)
      t.top_logprobs.push_back({.token_id = r.top_ids[j], .logprob = r.top_logprobs[j]});
  }
  return absl::OkStatus();
}

}  // namespace ernie::cuda
