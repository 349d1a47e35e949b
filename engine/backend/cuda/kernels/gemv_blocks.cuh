// The inner loop of the bf16 small-M linear kernels (gemv_bf16.cu,
// grouped_expert_gemv.cu): loads of one 128-wide k block of a warp's 16
// weight rows and its tensor-core products with up to 8 kTiles rows of x.
//
// Along k a warp moves in blocks of 128: lane (g, c) reads the 32
// contiguous k values [32c, 32c + 32) of the block from rows g and g + 8 of
// its tile (four 16-byte loads each; 4 lanes cover 256 contiguous bytes of a
// row) and the same 32 values of x row g. Those 32 values feed the 8 mma
// k-steps of the block: step s gives slots (2c, 2c+1) the physical k
// 32c + 4s + {0, 1} and slots (2c+8, 2c+9) the k 32c + 4s + {2, 3}, in A and
// B alike, i.e. the 32-bit words 2s and 2s+1 of what the lane loaded.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "engine/backend/cuda/kernels/linear_mma.cuh"

namespace ernie::cuda::kernels {

constexpr int kGemvBlockK = 128;

__device__ __forceinline__ uint32_t WordOf(const uint4* v, int w) { return reinterpret_cast<const uint32_t*>(v)[w]; }

// The lane's 16-byte pieces of one 128-wide k block, rows g and g + 8.
struct BlockWeights {
  uint4 a[4], b[4];
};

// Pieces past k (k % 8 == 0 keeps a piece wholly in or out) and blocks past
// the slice's last (valid false) read as zeros.
__device__ __forceinline__ void LoadBlock(const __nv_bfloat16* wa, const __nv_bfloat16* wb, int k, int k0, bool valid,
                                          BlockWeights& v) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int kk = k0 + 8 * i;
    const bool in = valid && kk < k;
    v.a[i] = in ? LoadStreaming16(wa + kk) : make_uint4(0, 0, 0, 0);
    v.b[i] = in ? LoadStreaming16(wb + kk) : make_uint4(0, 0, 0, 0);
  }
}

// One block into the accumulators. x_row[t] is this lane's row (8t + g) of
// x, or nullptr for a row of zeros; tiles t >= live_tiles (the same for the
// whole warp) are skipped. Even and odd k-steps go to separate
// accumulators, halving the chain of dependent mmas.
template <int kTiles>
__device__ __forceinline__ void ComputeBlock(const BlockWeights& v, const __nv_bfloat16* const (&x_row)[kTiles],
                                             int live_tiles, int k, int k0, float (*even)[4], float (*odd)[4]) {
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
    if (t >= live_tiles) break;
    uint4 xv[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int kk = k0 + 8 * i;
      xv[i] = x_row[t] != nullptr && kk < k ? __ldg(reinterpret_cast<const uint4*>(x_row[t] + kk))
                                            : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int s = 0; s < 8; ++s) {
      const uint32_t a[4] = {WordOf(v.a, 2 * s), WordOf(v.b, 2 * s), WordOf(v.a, 2 * s + 1), WordOf(v.b, 2 * s + 1)};
      MmaBf16(s % 2 == 0 ? even[t] : odd[t], a, WordOf(xv, 2 * s), WordOf(xv, 2 * s + 1));
    }
  }
}

// The warp's whole k slice: blocks slice, slice + k_slices, ... of rows
// wa and wb, software-pipelined (the next block's loads are in flight while
// this one computes); the sums land in even[].
template <int kTiles>
__device__ __forceinline__ void AccumulateSlice(const __nv_bfloat16* wa, const __nv_bfloat16* wb,
                                                const __nv_bfloat16* const (&x_row)[kTiles], int live_tiles, int k,
                                                int slice, int k_slices, float (*even)[4]) {
  const int c = threadIdx.x % 4;
  float odd[kTiles][4] = {};
  const int blocks = (k + kGemvBlockK - 1) / kGemvBlockK;
  BlockWeights cur, next;
  LoadBlock(wa, wb, k, slice * kGemvBlockK + 32 * c, slice < blocks, cur);
  for (int b = slice; b < blocks; b += k_slices) {
    const int nb = b + k_slices;
    LoadBlock(wa, wb, k, nb * kGemvBlockK + 32 * c, nb < blocks, next);
    ComputeBlock<kTiles>(cur, x_row, live_tiles, k, b * kGemvBlockK + 32 * c, even, odd);
    cur = next;
  }
#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int i = 0; i < 4; ++i) even[t][i] += odd[t][i];
}

}  // namespace ernie::cuda::kernels
