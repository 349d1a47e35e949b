// Causal attention of the step's query rows against the paged KV cache, for
// decodes and prefill chunks alike (a prefill chunk over a cached prefix is a
// work item whose tokens start past position 0). GQA-packed: one CTA takes a
// work item and one KV head, and the query rows of every head of that group
// (num_tokens * group rows) share each K/V load from device memory.
// Float32 scores, online softmax and accumulation; output in bf16.
//
// Split-KV: when a step has too few (item, KV head) pairs to fill the GPU (a
// decode batch of one has two), each pair's context is cut into num_splits
// ranges, one CTA each, writing unnormalised partial outputs with their
// running max and sum; a merge kernel then rescales and adds them. The number
// of splits depends only on the number of items (PagedAttentionSplits), so a
// captured CUDA graph stays valid for every context length.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/backend/cuda/paged_kv_view.h"

namespace ernie::cuda {

// Query rows one CTA holds: a work item has at most this many
// (token, head-of-the-group) rows. The host planner (step_plan.cc) sizes
// items by it.
inline constexpr int32_t kAttentionRowsPerCta = 8;

struct PagedAttentionParams {
  const float* q = nullptr;             // token t, head h at q + t * q_row_stride + h * head_dim (rotated)
  int64_t q_row_stride = 0;             // floats between tokens' q rows
  PagedKvView cache;                    // this layer; holds every position the items attend to
  const AttentionWorkItem* items = nullptr;  // [num_items]
  const int32_t* block_tables = nullptr;     // concatenated block tables, indexed from item.block_table_offset
  const int32_t* positions = nullptr;        // [tokens]: a row at position p attends positions 0..p
  __nv_bfloat16* out = nullptr;              // [tokens, num_heads * head_dim]
  float scale = 1.0f;                        // head_dim ^ -0.5
  int32_t num_items = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  // Split-KV (num_splits > 1 needs both buffers; see PagedAttentionPartialCtas).
  int32_t num_splits = 1;
  float* partial_out = nullptr;  // [num_items * num_kv_heads * num_splits, kAttentionRowsPerCta, head_dim]
  float* partial_ml = nullptr;   // [num_items * num_kv_heads * num_splits, kAttentionRowsPerCta, 2]: max, sum
  // Tensor-core kernel, decode steps of at most 8 query heads a KV head: the
  // queries as the mma's 8-wide side (mma_attention.h); false: the general
  // kernel's decode shape (the before of a same-run comparison).
  bool decode_swap_ab = true;
  // Tensor-core kernel, swap-AB decode steps with num_splits 1: the wide
  // kernel (mma_attention.h: 16 warps, 256 keys a round, no merge) instead
  // of the four-warp one. Faster only at short contexts
  // (kWideDecodeAttentionKeys); correct at any.
  bool wide_decode = false;
  // Tensor-core kernel: keys and values read with an L2 evict_first policy,
  // for steps whose caches outgrow the L2 (the backend's choice,
  // CudaBackendOptions::stream_kv_min_items): read once a step, they would
  // otherwise push out what the step's next kernels re-read (activations,
  // the residual, code). Smaller steps keep them: a batch-1 cache (~3.5 MB
  // at the 0.3b's 192 keys) stays in the L2 from one step to the next.
  bool stream_kv = false;
};

// Splits per (item, KV head) for a step of `num_items` items on a device of
// `num_sms` SMs: none when the pairs fill a quarter of the SMs or more (64
// decodes of the 0.3b shape ran 7% faster without the merge kernel,
// tools/bench/results/gpu-2026-12-02-v6-mma-attention/run5), else enough
// CTAs to cover the SMs twice, at most kMaxAttentionSplits.
inline constexpr int32_t kMaxAttentionSplits = 32;
int32_t PagedAttentionSplits(int32_t num_items, int32_t num_kv_heads, int32_t num_sms);

// Most partial CTAs (num_items * num_kv_heads * num_splits over every step
// with num_splits > 1) on a device of `num_sms` SMs: sizes partial_out/_ml.
int64_t PagedAttentionPartialCtas(int32_t num_sms);

// Head dims with an instantiation (others: cudaErrorInvalidValue).
bool PagedAttentionSupportsHeadDim(int32_t head_dim);

cudaError_t LaunchPagedAttention(const PagedAttentionParams& p, cudaStream_t stream);

}  // namespace ernie::cuda
