// Backend::WarmUp on the CUDA backend: a decode graph for every batch size
// serving can reach, captured before the first request. Captured lazily
// instead (the second time a shape is seen, graph_admission.h), each new
// batch size stalled the engine loop for a capture of 10 ms or more while
// every stream waited: 13 - 23 such steps in a 2-second run of 256 streams
// (gpu-serve-bench "steps over 10 ms", v22), each one on the time to first
// token of the requests queued behind it.
#include <algorithm>
#include <numeric>
#include <vector>

#include "engine/backend/cuda/cuda_backend_impl.h"
#include "engine/util/status_macros.h"

namespace ernie::cuda {

namespace {

// Sequences 0 .. batch-1, each one token at `position` over a table of its
// own blocks, every row a greedy sample: what a decode step of that batch
// size sends.
struct DecodeBatch {
  std::vector<int32_t> ids, positions, rows;
  std::vector<std::vector<int32_t>> tables;
  std::vector<SequenceSlice> sequences;
  std::vector<DeviceSampleRow> sample_rows;
  std::vector<SampledToken> sampled;

  DecodeBatch(int32_t batch, int32_t position, int32_t blocks_per_sequence, int64_t vocab) {
    static const SamplingParams kGreedy{.temperature = 0.0f};
    tables.resize(static_cast<size_t>(batch));
    for (int32_t s = 0; s < batch; ++s) {
      auto& table = tables[static_cast<size_t>(s)];
      table.resize(static_cast<size_t>(blocks_per_sequence));
      std::iota(table.begin(), table.end(), s * blocks_per_sequence);
      ids.push_back(static_cast<int32_t>((s + 1) % vocab));
      positions.push_back(position);
      rows.push_back(s);
      sample_rows.push_back({.logit_row = s, .params = &kGreedy, .seed = 1});
    }
    for (int32_t s = 0; s < batch; ++s) sequences.push_back({s, 1, position, tables[static_cast<size_t>(s)]});
    sampled.resize(static_cast<size_t>(batch));
  }
};

}  // namespace

absl::StatusOr<int32_t> CudaBackendImpl::WarmUp(int32_t max_sequences) {
  const int64_t block = kv_shape_.block_size;
  const int64_t max_batch = std::min<int64_t>({max_sequences, graph_max_tokens_, logit_rows_per_pass_,
                                              max_tokens_, kv_shape_.num_blocks});
  if (max_batch <= 0) return 0;  // graphs off
  // The warm-up's steps read cache blocks no sequence has written: zeros, not
  // stale memory (no sequence is live yet; each later one writes before it reads).
  ERNIE_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(kv_cache_.data(), 0, kv_cache_.size() * sizeof(uint16_t), stream_.get()),
                             "cudaMemsetAsync of the KV cache");
  const int32_t before = graphs_.size();
  for (int32_t batch = 1; batch <= max_batch; ++batch) {
    // The contexts whose steps take different graphs (graph_cache.h's key):
    // position 0; where the batch's short contexts run attention unsplit
    // (a decode step's items: one a sequence), one past them; and for
    // batch 1 with the persistent kernel, one past its context limit.
    std::vector<int64_t> positions = {0};
    if (const int64_t short_context = ShortAttentionContext(/*single_token=*/true, batch); short_context > 0)
      positions.push_back(short_context);
    if (batch == 1 && persistent_decode_max_context_ > 0) positions.push_back(persistent_decode_max_context_);
    for (const int64_t position : positions) {
      const int64_t blocks_per_sequence = position / block + 1;
      if (batch * blocks_per_sequence > kv_shape_.num_blocks || position + 1 > config_.max_position_embeddings) continue;
      DecodeBatch step(batch, static_cast<int32_t>(position), static_cast<int32_t>(blocks_per_sequence),
                       config_.vocab_size);
      const StepBatch input{step.ids, step.positions, step.sequences, step.rows};
      // The second time a key is seen it is captured (graph_admission.h).
      for (int pass = 0; pass < 2; ++pass)
        ERNIE_RETURN_IF_ERROR(ForwardAndSample(input, {.rows = step.sample_rows}, step.sampled));
    }
  }
  return graphs_.size() - before;
}

}  // namespace ernie::cuda
