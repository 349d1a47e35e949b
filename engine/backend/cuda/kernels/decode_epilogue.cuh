// Epilogue pieces shared by the fused decode linears (decode_linear.cu on
// bf16 weights, awq_decode_linear.cu on AWQ int4, cluster_decode_linear.cu,
// small_batch_gemm.cu).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "engine/backend/cuda/kernels/decode_linear.h"
#include "engine/backend/cuda/kernels/rotary.cuh"
#include "engine/backend/cuda/kernels/tma.cuh"

namespace ernie::cuda::kernels {

// kRotaryKv with prefetch_items (DecodeRotaryKv): thread 0 of CTA b asks the
// L2 for ranges b, b + gridDim.x, ... of the items' earlier keys, a range a
// block's K or V of every KV head ([block][head][row][dim]: one span), the
// items in order. Every CTA calls it before its programmatic wait (the bf16
// linear after its first weight requests); the first CTAs, which start
// first, take the ranges.
__device__ __forceinline__ void PrefetchEarlierKv(const DecodeRotaryKv& q) {
  if (q.prefetch_items == nullptr || threadIdx.x != 0) return;
  const PagedKvView& kv = q.cache;
  const auto block_bytes = static_cast<uint32_t>(int64_t{kv.num_kv_heads} * kv.block_size * kv.head_dim * 2);
  int range = static_cast<int>(blockIdx.x);
  for (int i = 0; i < q.prefetch_num_items; ++i) {
    const AttentionWorkItem item = q.prefetch_items[i];
    const int ranges = 2 * ((item.first_new_position + kv.block_size - 1) / kv.block_size);
    for (; range < ranges; range += static_cast<int>(gridDim.x)) {
      const int32_t block = q.prefetch_block_tables[item.block_table_offset + range / 2];
      if (block < 0 || block >= kv.num_blocks) continue;  // (never: the tables' blocks are the cache's)
      PrefetchToL2((range % 2 == 0 ? kv.k : kv.v) + KvOffset(kv, block, 0, 0), block_bytes);
    }
    range -= ranges;
  }
}

// kRotaryKv for input row r and the output pair (a, a + 1), a even, with
// values va, vb (bias added): rotated by kernels::RotatePair, as
// RotaryKvWriteKernel does; q to y ([*, n] float32), k and v to the cache.
__device__ __forceinline__ void RotaryKvStore(const DecodeRotaryKv& q, float* y, int64_t n, int r, int64_t a,
                                              float va, float vb) {
  const int d = q.cache.head_dim;
  const int head = static_cast<int>(a / d), i = static_cast<int>(a % d) / 2;
  const int32_t slot = q.slots[r];
  const int32_t block = slot / q.cache.block_size, block_row = slot % q.cache.block_size;
  if (head >= q.num_heads + q.cache.num_kv_heads) {  // v: stored as it is
    __nv_bfloat16* dst =
        q.cache.v + KvOffset(q.cache, block, head - q.num_heads - q.cache.num_kv_heads, block_row) + 2 * i;
    *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(va, vb);
    return;
  }
  const float2 rotated = kernels::RotatePair(va, vb, static_cast<float>(q.positions[r]), q.inv_freq[i]);
  const float ra = rotated.x, rb = rotated.y;
  if (head < q.num_heads) {
    y[int64_t{r} * n + a] = ra;
    y[int64_t{r} * n + a + 1] = rb;
    return;
  }
  __nv_bfloat16* dst = q.cache.k + KvOffset(q.cache, block, head - q.num_heads, block_row) + 2 * i;
  *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(ra, rb);
}

}  // namespace ernie::cuda::kernels
