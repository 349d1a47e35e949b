// Causal attention over a paged KV cache, float32, grouped-query: query head
// h reads KV head h / (num_heads / num_kv_heads).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/backend/cpu/cpu_kv_cache.h"
#include "engine/backend/step_batch.h"
#include "engine/util/thread_pool.h"

namespace ernie::cpu {

// Writes k and v ([tokens, kv_heads * head_dim], already rotated) of every
// batch token into its slot: position p of a sequence goes to block
// block_table[p / block_size], row p % block_size.
void WriteKv(const StepBatch& batch, const float* k, const float* v, int64_t layer, CpuKvCache& cache);

// seq_of_token[t] = the index in batch.sequences of token t's sequence; the
// same for every layer of a step, so the caller builds it once per step.
void SequenceOfEachToken(const StepBatch& batch, std::vector<int32_t>* seq_of_token);

// out[t, h*head_dim..] = softmax(q_t,h . K^T * scale) V over positions
// 0..position(t) of t's sequence. q, out: [tokens, num_heads * head_dim].
void PagedAttention(const StepBatch& batch, std::span<const int32_t> seq_of_token, const float* q,
                    int64_t num_heads, int64_t layer, const CpuKvCache& cache, float scale, float* out,
                    ThreadPool& pool);

}  // namespace ernie::cpu
