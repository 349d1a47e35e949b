// The inner loop of the AWQ int4 small-M kernels (awq_gemm.cu's decode GEMV,
// grouped_awq_gemv.cu's expert GEMV): one warp's k slice of one 16-row tile
// of awq_gemm.h's packed layout, dequantised in registers and multiplied
// with up to 8 kTiles rows of x on the tensor cores.
//
// Along k the warp steps in 64-k blocks: one 16-byte piece per lane (rows g
// and g + 8, two 32-k halves) and the block's scale/zero records. Both
// stream through a ring of kAwqStages blocks per warp in shared memory
// filled with cp.async, so kAwqStages - 1 blocks stay in flight while one is
// computed, without holding registers. Each 32-k half h is two mma k-steps
// whose slots hold
//   step e, slots (2c, 2c+1):   32h + 8c + 4e + {0, 1}
//   step e, slots (2c+8, 2c+9): 32h + 8c + 4e + {2, 3}
// so the lane's x operand for the half is the 16 bytes at x[32h + 8c], and
// the half's partial sums are scaled once by its group's s (every 32-k half
// lies in one group, group_size being a multiple of 32).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "engine/backend/cuda/kernels/linear_mma.cuh"

namespace ernie::cuda::kernels {

constexpr int kAwqBlockK = 64;
constexpr int kAwqStages = 8;           // ring depth per warp (blocks)
constexpr int kAwqRingPieces = 32 + 8;  // per block: a 16-byte piece per lane, then 8 record pairs

// One warp's ring, in shared memory: [kAwqStages][kAwqRingPieces] 16-byte
// pieces. A CTA holds kLinearWarps of them (40 KiB), which its epilogue may
// reuse as the cross-warp sum's staging area once every warp is done.
using AwqWarpRing = uint4[kAwqStages][kAwqRingPieces];

__device__ __forceinline__ uint32_t AwqWordOf(const uint4& v, int w) {
  return w == 0 ? v.x : w == 1 ? v.y : w == 2 ? v.z : v.w;
}

// The exact bf16 pair (q - z) of the nibbles at bits 4p and 16 + 4p of
// `word`: or-ing a nibble into the mantissa of bf16 128.0 (0x4300; its ulp
// is 1) gives 128 + q exactly; subtracting 128 + z (`zz`, both halves) is
// exact too (small integers).
__device__ __forceinline__ uint32_t AwqDequantPair(uint32_t word, int p, uint32_t zz) {
  const uint32_t biased = ((word >> (4 * p)) & 0x000F000Fu) | 0x43004300u;
  const __nv_bfloat162 d =
      __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&biased), *reinterpret_cast<const __nv_bfloat162*>(&zz));
  return *reinterpret_cast<const uint32_t*>(&d);
}

// A record's fp16 scale as float.
__device__ __forceinline__ float AwqRecordScale(uint32_t rec) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(rec & 0xffffu)));
}

// Words of the records of one group pair of one 16-row tile (awq_gemm.h):
// (k / group_size) rounded up to even, times 2.
__device__ __forceinline__ int AwqRecordGroups2(int k, int group_shift) { return ((k >> group_shift) + 1) / 2 * 2; }

// The warp's whole k slice (blocks slice, slice + k_slices, ...) of one
// 16-row tile into acc[t] (the D layout of linear_mma.cuh, rows of the tile
// by x rows 8t .. 8t+7).
//   tile_packed:  the tile's packed words, [k/64][32][4] (16-byte aligned)
//   tile_records: the tile's records, [8][groups2][2] (16-byte aligned)
//   x_row[t]:     this lane's row 8t + g of x ([k] bf16, 16-byte aligned),
//                 or nullptr for a row of zeros
//   live_tiles:   tiles t >= live_tiles are skipped (the same for the warp)
//   ring:         this warp's ring in shared memory
// Leaves no cp.async in flight.
template <int kTiles>
__device__ __forceinline__ void AwqAccumulateSlice(const uint32_t* tile_packed, const uint32_t* tile_records,
                                                   const __nv_bfloat16* const (&x_row)[kTiles], int live_tiles, int k,
                                                   int group_shift, int slice, int k_slices, AwqWarpRing& ring,
                                                   float (*acc)[4]) {
  const int lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int blocks = k / kAwqBlockK, groups2 = AwqRecordGroups2(k, group_shift);
  const uint4* packed = reinterpret_cast<const uint4*>(tile_packed) + lane;
  // This lane's g: records of rows g and g + 8 for group pairs (2j, 2j+1), one uint4 each.
  const uint4* records = reinterpret_cast<const uint4*>(tile_records) + g * groups2 / 2;
  const int my_blocks = slice < blocks ? (blocks - 1 - slice) / k_slices + 1 : 0;
  uint4* ring_w = &ring[0][lane];
  uint4* ring_r = &ring[0][32 + g];
  const bool copies_records = c == 0;
  const int block_step = k_slices * kAwqBlockK;
  const uint4* x_lane[kTiles];
#pragma unroll
  for (int t = 0; t < kTiles; ++t)
    x_lane[t] = x_row[t] != nullptr ? reinterpret_cast<const uint4*>(x_row[t] + 8 * c) : nullptr;
  auto issue = [&](int i) {  // block i of this slice into ring slot i % kAwqStages
    if (i >= my_blocks) return;
    const int b = slice + i * k_slices, slot = (i % kAwqStages) * kAwqRingPieces;
    CpAsync16(ring_w + slot, packed + b * 32);
    if (copies_records) CpAsync16(ring_r + slot, records + ((b * kAwqBlockK) >> group_shift) / 2);
  };
#pragma unroll
  for (int i = 0; i < kAwqStages - 1; ++i) {
    issue(i);
    CpAsyncCommit();
  }
  int kk0 = slice * kAwqBlockK;  // first k of block i
  for (int i = 0; i < my_blocks; ++i, kk0 += block_step) {
    CpAsyncWait<kAwqStages - 2>();  // block i has landed
    __syncwarp();                   // ... for every lane, and block i - 1's slot is free
    issue(i + kAwqStages - 1);
    CpAsyncCommit();
    const int slot = (i % kAwqStages) * kAwqRingPieces;
    const uint4 w = ring_w[slot];
    const uint4 r = ring_r[slot];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int kk = kk0 + 32 * h;
      const bool odd_group = ((kk >> group_shift) & 1) != 0;
      const uint32_t rec_a = odd_group ? r.z : r.x, rec_b = odd_group ? r.w : r.y;  // rows g, g + 8
      const float sa = AwqRecordScale(rec_a), sb = AwqRecordScale(rec_b);
      const uint32_t za = __byte_perm(rec_a, 0, 0x3232), zb = __byte_perm(rec_b, 0, 0x3232);  // 128 + z, twice
      const uint32_t wa = AwqWordOf(w, 2 * h), wb = AwqWordOf(w, 2 * h + 1);
      uint32_t ra[4], rb[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        ra[q] = AwqDequantPair(wa, q, za);
        rb[q] = AwqDequantPair(wb, q, zb);
      }
      const uint32_t a0[4] = {ra[0], rb[0], ra[1], rb[1]}, a1[4] = {ra[2], rb[2], ra[3], rb[3]};
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
        if (t >= live_tiles) break;  // same for the whole warp
        const uint4 xv = x_lane[t] != nullptr ? __ldg(x_lane[t] + kk / 8) : make_uint4(0, 0, 0, 0);
        float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        MmaBf16(part, a0, xv.x, xv.y);
        MmaBf16(part, a1, xv.z, xv.w);
        acc[t][0] = fmaf(sa, part[0], acc[t][0]);
        acc[t][1] = fmaf(sa, part[1], acc[t][1]);
        acc[t][2] = fmaf(sb, part[2], acc[t][2]);
        acc[t][3] = fmaf(sb, part[3], acc[t][3]);
      }
    }
  }
  CpAsyncWait<0>();
}

}  // namespace ernie::cuda::kernels
