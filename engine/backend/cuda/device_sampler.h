// Samples rows of device-resident logits on the GPU (kernels/sample_rows.cu)
// and returns SampledTokens, so only token ids and log-probabilities cross
// to the host. The draw's uniform is computed here on the host with the host
// sampler's own SamplingUniform(seed, sample_index, position), so both
// samplers draw from exactly the same Philox counters.
//
// Every processor the host Sampler has runs here too: logit_bias and the
// penalties as edits of the row (kernels/logit_edits.h), the min_tokens ban
// after them (the same row as the host's order: logit_edits.h). Logprobs are those of the raw logits, as on the host, so a row
// that asks for them and is about to be edited first has a raw pass (the
// sampling kernel, stats only: log-normalizer and top log-probabilities);
// the edit kernel keeps the logits it replaced, and the sampled token's raw
// logit is either one of those or, untouched, the one the sampling kernel
// reads.
//
// Owns its parameter and result buffers (allocated once for
// max_rows_per_launch rows; more rows go in several launches; the edit and
// raw-pass buffers grow with what a call needs). Not thread-safe: the
// backend's engine thread uses it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/kernels/greedy_rows.h"
#include "engine/backend/cuda/kernels/logit_edits.h"
#include "engine/backend/cuda/kernels/sample_rows.h"
#include "engine/backend/cuda/sample_edit_plan.h"

namespace ernie::cuda {

class DeviceSampler {
 public:
  // fast_greedy: greedy rows without logprobs take kernels/greedy_rows.h
  // (false: the sampling kernel takes every row, the before of that kernel).
  static absl::StatusOr<DeviceSampler> Create(int64_t vocab_size, int64_t max_rows_per_launch,
                                              bool fast_greedy = true);

  // Samples `rows` (checked by ValidateDeviceSamplingRequest) from `logits`
  // ([*, vocab] float32 on the device; rows[i] reads its row
  // rows[i].logit_row - first_logit_row) into out[i], on `stream`, and waits
  // for the results. Rows with logit_bias, penalties or a min_tokens ban in
  // force first have their logits row edited in place (once a row, however
  // many samples read it). InvalidArgument naming the row when it has no
  // finite logit, or when rows that share a logits row would edit it differently.
  absl::Status Sample(float* logits, int32_t first_logit_row, std::span<const DeviceSampleRow> rows,
                      std::span<SampledToken> out, cudaStream_t stream);

  int64_t bytes() const {
    return static_cast<int64_t>(params_.bytes() + results_.bytes() + greedy_keys_.bytes() + edit_rows_.bytes() +
                                edits_.bytes() + bans_.bytes() + originals_.bytes() + raw_params_.bytes() +
                                raw_results_.bytes());
  }

 private:
  // The raw pass of every row with a raw-pass slot in plan_, on the logits
  // before the edits.
  absl::Status LaunchRawPass(const float* logits, int32_t first_logit_row, std::span<const DeviceSampleRow> rows,
                             cudaStream_t stream);
  // Uploads and launches the edits plan_ lists, if any.
  absl::Status LaunchEdits(float* logits, cudaStream_t stream);
  // `raw_index`: rows' raw-pass results, or -1 (raw_index_ for these rows).
  absl::Status SampleChunk(const float* logits, int32_t first_logit_row, std::span<const DeviceSampleRow> rows,
                           std::span<const int32_t> raw_index, std::span<SampledToken> out, cudaStream_t stream);
  // A raw-pass row's logprob and top log-probabilities, from its raw result
  // and the token the edited row gave.
  void FinishRawRow(const DeviceSampleRow& row, const SampleRowResult& raw, const SampleRowResult& drawn,
                    SampledToken& out) const;

  int32_t vocab_ = 0;
  int64_t max_rows_ = 0;
  bool fast_greedy_ = true;
  DeviceBuffer<unsigned long long> greedy_keys_;          // [max_rows] the greedy kernel's argmax keys
  PinnedBuffer<unsigned long long> greedy_keys_staging_;  // [max_rows] host side of greedy_keys_
  PinnedBuffer<SampleRowParams> params_staging_;   // [max_rows] host side of params_
  DeviceBuffer<SampleRowParams> params_;           // [max_rows]
  DeviceBuffer<SampleRowResult> results_;          // [max_rows]
  PinnedBuffer<SampleRowResult> results_staging_;  // [max_rows] host side of results_
  // The edits of one Sample call (plan_): rows, per-token edits and bans,
  // grown on demand (a row has at most its distinct prompt and output tokens
  // plus its biases), and the logits the edits replaced.
  SampleEditPlan plan_;
  PinnedBuffer<LogitEditRow> edit_rows_staging_;
  DeviceBuffer<LogitEditRow> edit_rows_;
  PinnedBuffer<LogitEdit> edits_staging_;
  DeviceBuffer<LogitEdit> edits_;
  PinnedBuffer<int32_t> bans_staging_;
  DeviceBuffer<int32_t> bans_;
  DeviceBuffer<float> originals_;          // [num_edits_] when a row has a raw pass
  PinnedBuffer<float> originals_staging_;
  // The raw pass, a slot a row of plan_.raw_index().
  PinnedBuffer<SampleRowParams> raw_params_staging_;
  DeviceBuffer<SampleRowParams> raw_params_;
  DeviceBuffer<SampleRowResult> raw_results_;
  PinnedBuffer<SampleRowResult> raw_results_staging_;
};

// What a SamplingParams asks of the kernel, for one row (the uniform from
// SamplingUniform; inverse temperature 1.0f / temperature as the host computes it).
SampleRowParams MakeSampleRowParams(const DeviceSampleRow& row, int32_t first_logit_row);

}  // namespace ernie::cuda
