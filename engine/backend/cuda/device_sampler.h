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
// raw-pass buffers grow with what a call needs), and two page-locked
// staging slots that calls take in turn. Not thread-safe: the backend's
// engine thread uses it.
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

  // Sample split in two for overlapped steps: Enqueue only enqueues (and
  // copies what it needs of `rows`, which need not outlive it), and Finish,
  // once `stream` has passed that work (an event recorded after it), turns
  // the results into `out`. Only for rows CanEnqueue accepts: one launch of
  // rows, none with a raw pass (those go through Sample). Two staging slots
  // take turns, so one enqueued call may be pending while the next is made;
  // its Finish must come before the call after that (or a Sample).
  bool CanEnqueue(std::span<const DeviceSampleRow> rows) const;
  absl::Status Enqueue(float* logits, int32_t first_logit_row, std::span<const DeviceSampleRow> rows,
                       cudaStream_t stream);
  absl::Status Finish(std::span<SampledToken> out);

  // The device buffer the last launch left its tokens in (the next step's
  // fed-back tokens read them, kernels/feed_back_tokens.h): the sampling
  // kernel's and the greedy kernel's rows alike. Valid until the next call;
  // after a Sample of several launches, only the last launch's.
  const SampleRowResult* device_results() const { return results_.data(); }
  int64_t max_rows_per_launch() const { return max_rows_; }

  int64_t bytes() const;

 private:
  // What the host reads back of one row once its launch is done (copied at
  // enqueue, so the row's pointers are not read again).
  struct RowReadBack {
    int32_t logit_row = 0;
    int32_t top_logprobs = 0;  // entries wanted when logprobs
    bool logprobs = false;
  };
  // Page-locked copies of one call's parameters and results, with its plan.
  struct Staging {
    PinnedBuffer<unsigned long long> greedy_keys;  // [max_rows]
    // greedy_keys as the device addresses them (the greedy kernel writes
    // them itself), or nullptr where the device cannot: then they are copied.
    unsigned long long* greedy_keys_on_device = nullptr;
    PinnedBuffer<SampleRowParams> params;          // [max_rows]
    PinnedBuffer<SampleRowResult> results;         // [max_rows]
    PinnedBuffer<LogitEditRow> edit_rows;
    PinnedBuffer<LogitEdit> edits;
    PinnedBuffer<int32_t> bans;
    PinnedBuffer<float> originals;
    PinnedBuffer<SampleRowParams> raw_params;
    PinnedBuffer<SampleRowResult> raw_results;
    SampleEditPlan plan;
    std::vector<RowReadBack> read_back;  // the last launch's rows
    bool pending = false;                // enqueued, not yet finished
  };

  // Starts a call: the next staging slot (a pending one is an error).
  absl::StatusOr<Staging*> NextSlot();
  // The raw pass of every row with a raw-pass slot in the plan, on the
  // logits before the edits.
  absl::Status LaunchRawPass(Staging& slot, const float* logits, int32_t first_logit_row,
                             std::span<const DeviceSampleRow> rows, cudaStream_t stream);
  // Uploads and launches the edits the plan lists, if any.
  absl::Status LaunchEdits(Staging& slot, float* logits, cudaStream_t stream);
  // One launch of at most max_rows_ rows and its result copies, not waited for.
  // `raw_index`: rows' raw-pass results, or -1.
  absl::Status LaunchChunk(Staging& slot, const float* logits, int32_t first_logit_row,
                           std::span<const DeviceSampleRow> rows, std::span<const int32_t> raw_index,
                           cudaStream_t stream);
  // The results of the slot's last launch, once done. `rows` is read only for
  // rows with a raw pass (Sample's, still alive).
  absl::Status ReadChunk(const Staging& slot, std::span<const DeviceSampleRow> rows,
                         std::span<const int32_t> raw_index, std::span<SampledToken> out) const;
  // A raw-pass row's logprob and top log-probabilities, from its raw result
  // and the token the edited row gave.
  void FinishRawRow(const Staging& slot, const DeviceSampleRow& row, const SampleRowResult& raw,
                    const SampleRowResult& drawn, SampledToken& out) const;

  int32_t vocab_ = 0;
  int64_t max_rows_ = 0;
  bool fast_greedy_ = true;
  // [max_rows] the greedy kernel's argmax keys where the staging is not
  // mapped for the device (they are then copied to it).
  DeviceBuffer<unsigned long long> greedy_keys_;
  // [max_rows] each the greedy kernel's running key and arrivals of a row,
  // zero between its launches (kernels/greedy_rows.h).
  DeviceBuffer<unsigned long long> greedy_running_;
  DeviceBuffer<uint32_t> greedy_arrivals_;
  DeviceBuffer<SampleRowParams> params_;          // [max_rows]
  DeviceBuffer<SampleRowResult> results_;         // [max_rows]
  // The edits of one call (its slot's plan): rows, per-token edits and bans,
  // grown on demand (a row has at most its distinct prompt and output tokens
  // plus its biases), and the logits the edits replaced.
  DeviceBuffer<LogitEditRow> edit_rows_;
  DeviceBuffer<LogitEdit> edits_;
  DeviceBuffer<int32_t> bans_;
  DeviceBuffer<float> originals_;  // [num_edits] when a row has a raw pass
  // The raw pass, a slot a row of the plan's raw_index().
  DeviceBuffer<SampleRowParams> raw_params_;
  DeviceBuffer<SampleRowResult> raw_results_;
  Staging staging_[2];
  int current_ = 1;  // the slot of the latest call
};

// What a SamplingParams asks of the kernel, for one row (the uniform from
// SamplingUniform; inverse temperature 1.0f / temperature as the host computes it).
SampleRowParams MakeSampleRowParams(const DeviceSampleRow& row, int32_t first_logit_row);

}  // namespace ernie::cuda
