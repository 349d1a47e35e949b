// Samples rows of device-resident logits on the GPU (kernels/sample_rows.cu)
// and returns SampledTokens, so only token ids and log-probabilities cross
// to the host. The draw's uniform is computed here on the host with the host
// sampler's own SamplingUniform(seed, sample_index, position), so both
// samplers draw from exactly the same Philox counters.
//
// Owns its parameter and result buffers (allocated once for
// max_rows_per_launch rows; more rows go in several launches). Not
// thread-safe: the backend's engine thread uses it.
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

namespace ernie::cuda {

class DeviceSampler {
 public:
  // fast_greedy: greedy rows without logprobs or bans take kernels/greedy_rows.h
  // (false: the sampling kernel takes every row, the before of that kernel).
  static absl::StatusOr<DeviceSampler> Create(int64_t vocab_size, int64_t max_rows_per_launch,
                                              bool fast_greedy = true);

  // Samples `rows` (checked by ValidateDeviceSamplingRequest) from `logits`
  // ([*, vocab] float32 on the device; rows[i] reads its row
  // rows[i].logit_row - first_logit_row) into out[i], on `stream`, and waits
  // for the results. Rows with logit_bias or penalties first have their
  // logits row edited in place (once a row, however many samples read it).
  // InvalidArgument naming the row when it has no finite logit, or when rows
  // that share a logits row would edit it differently.
  absl::Status Sample(float* logits, int32_t first_logit_row, std::span<const DeviceSampleRow> rows,
                      std::span<SampledToken> out, cudaStream_t stream);

  int64_t bytes() const {
    return static_cast<int64_t>(params_.bytes() + results_.bytes() + greedy_keys_.bytes() + edit_rows_.bytes() +
                                edits_.bytes());
  }

 private:
  // Uploads and launches the logits edits of `rows` (logit_edit.h), if any.
  absl::Status EditRows(float* logits, int32_t first_logit_row, std::span<const DeviceSampleRow> rows,
                        cudaStream_t stream);
  absl::Status SampleChunk(const float* logits, int32_t first_logit_row, std::span<const DeviceSampleRow> rows,
                           std::span<SampledToken> out, cudaStream_t stream);

  int32_t vocab_ = 0;
  int64_t max_rows_ = 0;
  bool fast_greedy_ = true;
  DeviceBuffer<unsigned long long> greedy_keys_;          // [max_rows] the greedy kernel's argmax keys
  PinnedBuffer<unsigned long long> greedy_keys_staging_;  // [max_rows] host side of greedy_keys_
  PinnedBuffer<SampleRowParams> params_staging_;   // [max_rows] host side of params_
  DeviceBuffer<SampleRowParams> params_;           // [max_rows]
  DeviceBuffer<SampleRowResult> results_;          // [max_rows]
  PinnedBuffer<SampleRowResult> results_staging_;  // [max_rows] host side of results_
  // The edits of one Sample call: rows and per-token edits, grown on demand
  // (a row has at most its distinct prompt and output tokens plus its biases).
  std::vector<LogitEditRow> edit_rows_host_;
  PinnedBuffer<LogitEditRow> edit_rows_staging_;
  DeviceBuffer<LogitEditRow> edit_rows_;
  PinnedBuffer<LogitEdit> edits_staging_;
  DeviceBuffer<LogitEdit> edits_;
};

// What a SamplingParams asks of the kernel, for one row (the uniform from
// SamplingUniform; inverse temperature 1.0f / temperature as the host computes it).
SampleRowParams MakeSampleRowParams(const DeviceSampleRow& row, int32_t first_logit_row);

}  // namespace ernie::cuda
