// The seam between the scheduler and the math. A backend owns the model's
// weights in its own memory, the KV cache storage ([num_blocks, ...] per
// layer, addressed by block ids the scheduler's block pool hands out) and
// every workspace; the scheduler owns which block belongs to whom.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/backend/step_batch.h"
#include "engine/sample/logit_edit.h"
#include "engine/sample/sampler.h"
#include "engine/sample/sampling_params.h"

namespace ernie {

// Geometry of a paged KV cache.
struct KvCacheShape {
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t block_size = 16;  // tokens per block
  int64_t num_blocks = 0;
  int64_t bytes_per_element = 4;

  int64_t bytes_per_token() const { return num_layers * num_kv_heads * head_dim * 2 * bytes_per_element; }
  int64_t bytes_per_block() const { return bytes_per_token() * block_size; }
  int64_t total_bytes() const { return bytes_per_block() * num_blocks; }
};

// Copy rows [0, num_tokens) of src_block's keys and values, every layer,
// into dst_block (a forked sequence's private tail block).
struct BlockCopyOp {
  int32_t src_block = 0;
  int32_t dst_block = 0;
  int32_t num_tokens = 0;
};

// Sampling on the device (issue 7). Copying every logits row to the host
// ([rows, vocab] float32, 414 KB a row for ERNIE-4.5) dominated a large
// decode step (6.2 of 8.4 ms at batch 256 on an H200), so a backend may
// sample every row on its device, with every processor the host Sampler has
// (logit_bias, the penalties and the min_tokens ban as edits of the row,
// logprobs of the raw logits), and return only tokens and log-probabilities.
//
// One sample row: which logits row it reads and the draw's Philox counter.
// Several rows may read one logits row (the n samples of a request forked in
// the step its prompt finished).
struct DeviceSampleRow {
  int32_t logit_row = 0;                   // index into StepBatch::logit_token_indices
  const SamplingParams* params = nullptr;  // validated (ValidateSamplingParams)
  uint64_t seed = 0;                       // the request's seed (SamplerRow::seed)
  uint32_t sample_index = 0;               // SamplerRow::sample_index
  uint64_t position = 0;                   // output tokens so far (SamplerRow::output.num_tokens())
  // While a min_tokens ban is in force (position < params->min_tokens): the
  // eos and stop ids it bans, required; ignored otherwise. Owned by the
  // caller for the step.
  const std::vector<int32_t>* banned_ids = nullptr;
  // With logit_bias or a penalty: the sample's edits of its logits row
  // (engine/sample/logit_edit.h), current to `position` output tokens; null
  // otherwise. Owned by the caller for the step. The device edits the row in
  // place, so rows that share a logit_row (an n > 1 fork) must have the same
  // params and position.
  const SampleLogitEdits* edits = nullptr;
};

struct DeviceSamplingRequest {
  // The result of rows[i] goes to sampled[i].
  std::span<const DeviceSampleRow> rows;
};

// Steps a backend ran, by how (Backend::step_counters).
struct BackendStepCounters {
  int64_t graph_replays = 0;
  int64_t graph_captures = 0;
  int64_t eager_steps = 0;
  // Of all of those, the steps run as one persistent decode kernel (the
  // CUDA backend's batch-1 decode of a dense bf16 model).
  int64_t persistent_steps = 0;
};

// The newest launched step's sampled ids, as a backend's next launch needs
// them for its fed-back tokens (StepBatch::fed_back_tokens). Backends that
// know a launch's tokens on the host record them; one whose tokens stay on
// its device records only the row count and fills them in there.
class LaunchedTokens {
 public:
  // Checks a batch's fed-back tokens against the newest launch (each names
  // a token of the batch, in order, and a row that launch sampled).
  absl::Status Validate(const StepBatch& batch) const;

  void RecordOnHost(std::span<const SampledToken> sampled);
  void RecordOnDevice(int64_t rows);

  // For a launch recorded on the host: `batch` with its fed-back tokens
  // written into its token ids and the list cleared (the ids live here
  // until the next call). Recorded on the device: `batch` unchanged, for
  // the backend to fill them in there.
  StepBatch FillIn(const StepBatch& batch);

 private:
  int64_t rows_ = -1;  // -1: nothing launched yet
  bool on_device_ = false;
  std::vector<int32_t> tokens_;  // when recorded on the host
  std::vector<int32_t> filled_;  // FillIn's token ids
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string_view name() const = 0;
  virtual const KvCacheShape& kv_shape() const = 0;
  virtual int64_t vocab_size() const = 0;
  // Most tokens one Forward may carry (the workspaces are sized for it).
  virtual int64_t max_tokens_per_step() const = 0;

  // Runs one step: writes the batch's keys and values into the cache, and
  // logits for logit_token_indices into `logits`
  // ([logit_token_indices.size(), vocab_size()], row-major). InvalidArgument
  // for a malformed batch (block ids out of range, too many tokens, a
  // position beyond the block table); the cache is then left unchanged for
  // sequences not yet processed, but the batch as a whole must be retried.
  virtual absl::Status Forward(const StepBatch& batch, std::span<float> logits) = 0;

  // Performs block copies before the next Forward. InvalidArgument for ids
  // outside the pool or num_tokens beyond a block.
  virtual absl::Status CopyBlocks(std::span<const BlockCopyOp> copies) = 0;

  // How the backend has run its steps so far (for metrics): replays of a
  // captured CUDA graph, steps that captured one, and steps launched kernel
  // by kernel. Backends without CUDA graphs (cpu, instant) report all 0.
  virtual BackendStepCounters step_counters() const { return {}; }

  // Prepares what serving will replay before the first request, so no step
  // of a running server pays a one-time cost (the CUDA backend captures a
  // decode-step graph for every batch size up to max_sequences); returns how
  // many it prepared. The cache's contents are unspecified afterwards: call
  // it before any sequence is live. Its steps count in step_counters().
  // Backends with nothing to prepare return 0.
  virtual absl::StatusOr<int32_t> WarmUp(int32_t /*max_sequences*/) { return 0; }

  // Whether ForwardAndSample is available. The CPU and instant backends
  // keep the plain logits path (their logits are already in host memory).
  virtual bool SupportsDeviceSampling() const { return false; }

  // Forward, then instead of returning every logits row: samples
  // request.rows on the device with the host Sampler's semantics (greedy
  // ties to the smaller id; the same Philox counter layout, so a seeded row
  // draws the same token wherever float rounding does not flip a choice;
  // processors edit the row as the host's do; logprobs from the raw logits)
  // into `sampled` ([request.rows.size()]). InvalidArgument as Forward, and
  // for a row out of range or without what its processors need (edits,
  // banned ids); Unimplemented unless SupportsDeviceSampling().
  virtual absl::Status ForwardAndSample(const StepBatch& batch, const DeviceSamplingRequest& request,
                                        std::span<SampledToken> sampled);

  // Overlapped steps (issue 7: the host prepares step N+1 while the device
  // runs step N). LaunchForwardAndSample is ForwardAndSample split in two:
  // it takes the step (batch.fed_back_tokens may name the previous launch's
  // sample rows) and WaitForSamples returns the results of the oldest
  // launched step not yet waited for, in launch order. The engine launches
  // step N+1, then waits for step N. Pointers in `request` need only live
  // until the launch returns. A failed launch is not queued; a failed wait
  // still consumes its step. Unimplemented unless SupportsDeviceSampling().
  //
  // This default runs the whole step inside the launch (ForwardAndSample,
  // with the fed-back tokens it already knows) and keeps its results for
  // the wait, so any device-sampling backend takes launches; a backend
  // whose device really runs behind the host overrides both and returns
  // true from OverlapsSteps().
  virtual absl::Status LaunchForwardAndSample(const StepBatch& batch, const DeviceSamplingRequest& request);
  virtual absl::Status WaitForSamples(std::span<SampledToken> sampled);
  // Whether a launch returns before its step has run, so overlapping the
  // host's work with it pays (EngineConfig::overlap_steps applies only then).
  virtual bool OverlapsSteps() const { return false; }

 private:
  // The default launch's state: results not yet waited for, oldest first,
  // and the newest launch's sampled ids, which the next launch reads.
  std::deque<std::vector<SampledToken>> launched_results_;
  LaunchedTokens last_launch_;
};

// Moves a launched step's results into a wait's `out`; InvalidArgument when
// the sizes differ (shared by backends' WaitForSamples).
absl::Status HandOverLaunchedResults(std::vector<SampledToken>& results, std::span<SampledToken> out);

// Checks copies against a cache shape (shared by backends).
absl::Status ValidateBlockCopies(std::span<const BlockCopyOp> copies, const KvCacheShape& kv);

// Checks a batch against a cache shape and a token limit, but not a logits
// buffer (shared by backends).
absl::Status ValidateStepBatchShape(const StepBatch& batch, const KvCacheShape& kv, int64_t max_tokens,
                                    int64_t vocab_size);

// Checks a device-sampling request against its batch and output buffers.
absl::Status ValidateDeviceSamplingRequest(const StepBatch& batch, const DeviceSamplingRequest& request,
                                           std::span<const SampledToken> sampled);

// ValidateStepBatchShape plus the logits buffer's size (shared by backends).
absl::Status ValidateStepBatch(const StepBatch& batch, const KvCacheShape& kv, int64_t max_tokens,
                               int64_t vocab_size, std::span<const float> logits);

}  // namespace ernie
