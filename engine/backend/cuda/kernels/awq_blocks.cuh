// The inner loop of the AWQ int4 small-M kernels (awq_gemm.cu's decode GEMV,
// grouped_awq_gemv.cu's expert GEMV): one warp's k slice of one 16-row tile
// of awq_gemm.h's packed layout, dequantised in registers and multiplied
// with up to 8 kTiles rows of x on the tensor cores.
//
// Along k the warp steps in chunks of four 64-k blocks (256 k): a lane loads
// its 16-byte piece of each block (rows g and g + 8, two 32-k halves) and
// the scale/zero records of the chunk's groups straight into registers,
// kAwqChunksInFlight chunks ahead (2 to 4 KiB a warp in flight while one
// chunk is computed). Each 32-k half h of a block is two mma
// k-steps whose slots hold
//   step e, slots (2c, 2c+1):   32h + 8c + 4e + {0, 1}
//   step e, slots (2c+8, 2c+9): 32h + 8c + 4e + {2, 3}
// so the lane's x operand for the half is the 16 bytes at x[32h + 8c]. The
// products of all halves that share a scale (one group, or 128 k when the
// group is longer) are summed before the scale is applied once.
//
// The first chunks are requested before WaitForPrerequisiteGrids: the
// weights never depend on earlier kernels, so under programmatic dependent
// launch their loads overlap the previous kernel's tail (a no-op wait for
// kernels launched without it).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/linear_mma.cuh"

namespace ernie::cuda::kernels {

constexpr int kAwqBlockK = 64;
constexpr int kAwqChunkBlocks = 4;  // blocks per loop step
constexpr int kAwqChunkK = kAwqBlockK * kAwqChunkBlocks;
// Whether rows of k split into whole chunks: the launchers' pick of the
// kernels compiled with kWholeChunks (AwqComputeChunk).
inline bool AwqWholeChunks(int64_t k) { return k % kAwqChunkK == 0; }
// Chunks a warp keeps loading while it computes one: two for one x tile
// (m <= 8: few warps a CTA can hold, so each keeps more bytes in flight;
// ncu on 8192 x 8192 with one: 24% occupancy, the schedulers idle 68% of
// cycles waiting on loads), one for more tiles (registers).
template <int kTiles>
constexpr int kAwqChunksInFlight = kTiles == 1 ? 2 : 1;
// The lean one-tile loop (GroupedAwqGemvParams::lean): one chunk in
// flight, so a thread needs at most 80 registers and three CTAs of 8 warps
// share an SM where the two-chunk loop fits two: the launcher's k split
// then doubles, and each scheduler has ~6 warps to pick from instead of ~3
// (ncu, v15: 2.8 warps a scheduler, 0.58 eligible, a third of the stalls
// waiting on shared-memory loads of x). The 21B-A3B AWQ step 2.5 - 8%
// faster at batches 1 - 32 on an H100 (NOTES.md v36); the dense int4 GEMV
// (8192^2, m = 1) was slower with it: its k split cannot grow.
constexpr int kAwqLeanInFlight = 1;
constexpr int kAwqLeanCtasPerSm = 3;

// x rows staged in shared memory for the k loop (the int4 GEMVs, m <= 8):
// read from global memory inside the loop, each x load was an L1 miss more
// often than not (the weights stream past it) and the mma waited on it (ncu,
// 8192 x 8192, m = 1: 4.4 of 9.5 cycles a warp instruction stalled on
// L1TEX). A row is k + 8 bf16 apart, so the 8 rows a tile's lanes read at
// once start 16 bytes further along the banks and do not conflict.
constexpr int kAwqStagedRowPad = 8;
// Shared memory the staged rows may take: with the 4 KB cross-warp sums of
// a one-tile kernel, the 48 KB a CTA gets without opting in (8 rows of
// k = 2,560 take 41,088 bytes).
constexpr int64_t kAwqMaxStagedXBytes = 44 * 1024;

// Unit sums of staged x rows, for AwqAccumulateSlice's kXSums: a unit is
// the k that shares a scale, 32 * scale_halves (AwqScaleHalves). Layout:
// [unit][8] float32, the 8 x rows of a one-tile kernel, after the rows in
// shared memory. Summing while staging adds a shuffle reduction to each
// staging pass, which then waits for its loads before the next pass: cheap
// for the decode kernels' m <= 8 rows in a few passes (v11: the fused decode
// linear 10.4 -> 9.7 us, the dense GEMV never slower); the grouped GEMV's 8
// slot rows a tile take 10 passes at k = 2,560 (ncu, v11: 20.4 -> 22.9 us a
// launch, end to end the 21B-A3B AWQ step still faster): batching those
// passes' loads is the next thing to try there.
__host__ __device__ constexpr int64_t AwqXSumsBytes(int64_t k, int scale_halves) {
  return k / (32 * scale_halves) * 8 * 4;
}
// Shared memory of `rows` staged rows (StageAwqXRowsWithSums) and their unit sums.
__host__ __device__ constexpr int64_t AwqStagedXBytes(int64_t rows, int64_t k, int scale_halves) {
  return rows * (k + kAwqStagedRowPad) * 2 + AwqXSumsBytes(k, scale_halves);
}
// Where the sums of `rows` staged rows start (16-byte aligned, k being a multiple of 64).
__device__ __forceinline__ float* AwqStagedXSums(__nv_bfloat16* xs, int rows, int k) {
  return reinterpret_cast<float*>(xs + int64_t{rows} * (k + kAwqStagedRowPad));
}

// Sum of the 8 bf16 in v, in float32.
__device__ __forceinline__ float AwqSumOf8(const uint4& v) {
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
  float s = 0.0f;
#pragma unroll
  for (int w = 0; w < 4; ++w) {
    const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&words[w]));
    s += f.x + f.y;
  }
  return s;
}

// One unit sum from kLanes consecutive lanes, each holding the sum of its
// piece of the unit (piece `piece` of row `row`; pieces of a row numbered
// along k, kLanes to a unit, the warp's lanes on consecutive pieces starting
// at a unit boundary). Every lane of the warp calls it; `valid` false for
// lanes past the data.
template <int kLanes>
__device__ __forceinline__ void StoreAwqUnitSum(float s, bool valid, int row, int piece, float* x_sums) {
#pragma unroll
  for (int o = kLanes / 2; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (valid && piece % kLanes == 0) x_sums[piece / kLanes * 8 + row] = s;
}

// Zero sums for rows rows .. 7 (those a tile's lanes read without data).
template <int kScaleHalves>
__device__ __forceinline__ void ZeroAwqUnitSums(int rows, int k, float* x_sums) {
  const int slots = k / (32 * kScaleHalves) * 8;  // [unit][8]
  for (int i = threadIdx.x; i < slots; i += blockDim.x)
    if (i % 8 >= rows) x_sums[i] = 0.0f;
}

// Copies `rows` (<= 8) rows of k bf16 into xs (stride k + kAwqStagedRowPad)
// and their unit sums to x_sums; row r comes from row_of(r), nullptr for a
// row of zeros. All threads of the CTA take part (whole warps each pass, for
// the sums' shuffles); the caller synchronises before reading xs.
// kInPlace: the rows are in xs already (CopyAwqXRowsAsync); only the sums
// are taken, row_of unused. kBypassL1: the rows are read from the L2 (rows
// another CTA of a running kernel wrote, this SM's L1 may hold older lines).
template <int kScaleHalves, bool kInPlace = false, bool kBypassL1 = false, typename RowOf>
__device__ __forceinline__ void StageAwqXRowsWithSums(int rows, int k, __nv_bfloat16* xs, float* x_sums,
                                                      const RowOf& row_of) {
  const int pieces = k / 8, stride = (k + kAwqStagedRowPad) / 8, total = rows * pieces;
  // i / pieces as a multiply-high: exact while 8 pieces^2 < 2^32 (k < 185k),
  // and one division a thread instead of one a pass (ncu, v14: the divisions
  // were a fifth of the staging's instructions).
  const uint32_t reciprocal = 0xffffffffu / static_cast<uint32_t>(pieces) + 1;
  auto* dst = reinterpret_cast<uint4*>(xs);
  for (int base = 0; base < total; base += blockDim.x) {
    const int i = base + threadIdx.x;
    const bool valid = i < total;
    const int r = valid ? static_cast<int>(__umulhi(static_cast<uint32_t>(i), reciprocal)) : 0;
    const int c = i - r * pieces;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (valid) {
      if constexpr (kInPlace) {
        v = dst[r * stride + c];
      } else {
        const __nv_bfloat16* src = row_of(r);
        const auto* row = reinterpret_cast<const uint4*>(src);
        if (src != nullptr) v = kBypassL1 ? __ldcg(row + c) : row[c];
        dst[r * stride + c] = v;
      }
    }
    StoreAwqUnitSum<4 * kScaleHalves>(AwqSumOf8(v), valid, r, c, x_sums);
  }
  ZeroAwqUnitSums<kScaleHalves>(rows, k, x_sums);
}

// The first half of staging for kernels whose x is ready when they start
// (the grouped GEMV after the routing): `rows` rows into xs as above, by
// cp.async in one commit group, issued before the weights' loads. The L1
// returns a warp's loads in order, so x loaded after the weights (the other
// kernels' order) waits for the weight chunks in flight first (ncu, v15: 13%
// of the grouped GEMV's stall samples on that wait at batch 1). Once the copies
// have landed (CpAsyncWait<0>, then a barrier), SumAwqStagedXRows takes the
// unit sums.
template <typename RowOf>
__device__ __forceinline__ void CopyAwqXRowsAsync(int rows, int k, __nv_bfloat16* xs, const RowOf& row_of) {
  const int pieces = k / 8, stride = (k + kAwqStagedRowPad) / 8, total = rows * pieces;
  const uint32_t reciprocal = 0xffffffffu / static_cast<uint32_t>(pieces) + 1;  // as above
  auto* dst = reinterpret_cast<uint4*>(xs);
  for (int i = threadIdx.x; i < total; i += blockDim.x) {
    const int r = static_cast<int>(__umulhi(static_cast<uint32_t>(i), reciprocal)), c = i - r * pieces;
    const __nv_bfloat16* src = row_of(r);
    if (src != nullptr) {
      CpAsync16(dst + r * stride + c, reinterpret_cast<const uint4*>(src) + c);
    } else {
      dst[r * stride + c] = make_uint4(0, 0, 0, 0);
    }
  }
  CpAsyncCommit();
}

template <int kScaleHalves>
__device__ __forceinline__ void SumAwqStagedXRows(int rows, int k, __nv_bfloat16* xs, float* x_sums) {
  StageAwqXRowsWithSums<kScaleHalves, true>(rows, k, xs, x_sums, [](int) { return nullptr; });
}

// Chunks along k (the last may be partial: k is a multiple of 64 only).
__host__ __device__ constexpr int AwqChunks(int k) { return (k / kAwqBlockK + kAwqChunkBlocks - 1) / kAwqChunkBlocks; }

// 32-k halves that share one scale for a group size: every half of a
// 128-k unit lies in one group when the group is 128 or longer; shorter
// groups scale each half.
inline int AwqScaleHalves(int group_size) { return group_size >= 128 ? 4 : 1; }

__device__ __forceinline__ uint32_t AwqWordOf(const uint4& v, int w) {
  return w == 0 ? v.x : w == 1 ? v.y : w == 2 ? v.z : v.w;
}

// (a & b) | c in one LOP3. Written as C, ptxas emits two (ncu's SASS of the
// int4 GEMV, v14: an and with 0x000F000F, then an or with 0x43004300), as a
// LOP3 has one immediate slot; given the three operands in registers it
// keeps the constants in registers outside the loop and issues one.
__device__ __forceinline__ uint32_t AndOr(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));  // 0xEA = (0xF0 & 0xCC) | 0xAA
  return d;
}

// The pair (128 + q) of the nibbles at bits 4p and 16 + 4p of `word`, as
// bf16: or-ing a nibble into the mantissa of bf16 128.0 (0x4300; its ulp is
// 1) gives 128 + q exactly. One shift (none for p = 0) and one LOP3.
__device__ __forceinline__ uint32_t AwqBiasedPair(uint32_t word, int p) {
  return AndOr(word >> (4 * p), 0x000F000Fu, 0x43004300u);
}

// The exact bf16 pair (q - z) of the nibbles at bits 4p and 16 + 4p of
// `word`: (128 + q) - (128 + z) (`zz`, both halves) is exact (small integers).
__device__ __forceinline__ uint32_t AwqDequantPair(uint32_t word, int p, uint32_t zz) {
  const uint32_t biased = AwqBiasedPair(word, p);
  const __nv_bfloat162 d =
      __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&biased), *reinterpret_cast<const __nv_bfloat162*>(&zz));
  return *reinterpret_cast<const uint32_t*>(&d);
}

// A record's fp16 scale as float.
__device__ __forceinline__ float AwqRecordScale(uint32_t rec) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(rec & 0xffffu)));
}

// One packed word as its 8 bf16 weights (q - z) * s, in k order: the word j
// of a lane's 16 bytes of a 64-k block holds one row at 8 consecutive k
// (awq_gemm.h), `rec` is that row's record for their group. (q - z) * s is
// exact in float32 (a 4-bit integer times an 11-bit mantissa): one
// rounding, to bf16. What the dequantise kernel and the int4 small-batch
// GEMM's staging write, 16 bytes at a time.
__device__ __forceinline__ uint4 AwqDequantWord(uint32_t word, uint32_t rec) {
  const float s = AwqRecordScale(rec);
  const int z = static_cast<int>(rec >> 16) - 0x4300;
  uint32_t pairs[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int lo = static_cast<int>((word >> (4 * q)) & 0xFu), hi = static_cast<int>((word >> (16 + 4 * q)) & 0xFu);
    const __nv_bfloat162 d = __floats2bfloat162_rn(static_cast<float>(lo - z) * s, static_cast<float>(hi - z) * s);
    pairs[q] = *reinterpret_cast<const uint32_t*>(&d);
  }
  return make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
}

// Words of the records of one group pair of one 16-row tile (awq_gemm.h):
// (k / group_size) rounded up to even, times 2.
__host__ __device__ __forceinline__ int AwqRecordGroups2(int k, int group_shift) { return ((k >> group_shift) + 1) / 2 * 2; }

// What a lane holds of one chunk: its piece of each block and, per scale
// unit (kScaleHalves halves), the records of rows g and g + 8. Blocks and
// units past k read as zeros.
template <int kScaleHalves>
struct AwqChunk {
  static constexpr int kUnits = 2 * kAwqChunkBlocks / kScaleHalves;
  uint4 w[kAwqChunkBlocks];
  uint2 rec[kUnits];
};

// One chunk (chunk index ch) of AwqAccumulateSlice's k loop, from the
// lane's registers `v`: dequantise, multiply with x on the tensor cores, and
// apply each unit's scale (and, with kXSums, its zero point) into acc.
// Shared by the register loop below and the bulk-copy loop
// (awq_bulk_loop.cuh).
//
// kMayEndEarly: the chunk may be k's partial last one, so each unit and half
// checks it lies before k. A full chunk is compiled without those checks
// (AwqComputeChunk below picks; a branch and, after it, a warp
// re-convergence for the mmas cost ~4 instructions a block).
// Units in lockstep: one x tile at groups >= 128 walks the chunk's two
// units half by half, side by side, so their mma chains interleave: four
// independent chains of four mmas instead of two units of two chains one
// after the other. The dense GEMV's warps wait on these chains at decode
// sizes (ncu, v37: at two warps a scheduler a third of its stall samples
// were fixed-latency waits and issue; its read-only walk ran the same loads
// in 12 us against its 21). More tiles (or shorter groups, one half a unit)
// keep one unit at a time: their sums would take too many registers, as
// they would in the lean loop's 80 (kInFlight 1: it spilled).
template <int kTiles, int kScaleHalves, int kInFlight>
constexpr int kAwqLockstepUnits =
    kTiles == 1 && kScaleHalves == 4 && kInFlight >= 2 ? AwqChunk<kScaleHalves>::kUnits : 1;

template <int kTiles, int kScaleHalves, bool kXSums, bool kMayEndEarly, int kLockstep>
__device__ __forceinline__ void AwqComputeChunkOf(const AwqChunk<kScaleHalves>& v, int ch, int blocks,
                                                  const uint4* const (&x_lane)[kTiles], const float* x_sums,
                                                  int live_tiles, float (*acc)[4]) {
  using Chunk = AwqChunk<kScaleHalves>;
  static_assert(Chunk::kUnits % kLockstep == 0, "whole groups of units");
  const int c = threadIdx.x % 4;
  const int b0 = ch * kAwqChunkBlocks;
#pragma unroll
  for (int j0 = 0; j0 < Chunk::kUnits; j0 += kLockstep) {
    if (kMayEndEarly && b0 + j0 * kScaleHalves / 2 >= blocks) break;  // a unit past k (the partial chunk only)
    // Steps e = 0 and 1 of each half into separate sums: short chains of dependent mmas.
    float even[kLockstep][kTiles][4] = {}, odd[kLockstep][kTiles][4] = {};
#pragma unroll
    for (int hh = 0; hh < kScaleHalves; ++hh) {
#pragma unroll
      for (int jj = 0; jj < kLockstep; ++jj) {
        const int j = j0 + jj, half = j * kScaleHalves + hh, u = half / 2, h = half % 2;
        if (kMayEndEarly && b0 + u >= blocks) continue;  // the same for the whole warp (the chunk past k only)
        const uint32_t za = __byte_perm(v.rec[j].x, 0, 0x3232), zb = __byte_perm(v.rec[j].y, 0, 0x3232);  // 128 + z
        const uint32_t wa = AwqWordOf(v.w[u], 2 * h), wb = AwqWordOf(v.w[u], 2 * h + 1);  // rows g, g + 8
        uint32_t ra[4], rb[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          ra[q] = kXSums ? AwqBiasedPair(wa, q) : AwqDequantPair(wa, q, za);
          rb[q] = kXSums ? AwqBiasedPair(wb, q) : AwqDequantPair(wb, q, zb);
        }
        const uint32_t a0[4] = {ra[0], rb[0], ra[1], rb[1]}, a1[4] = {ra[2], rb[2], ra[3], rb[3]};
        const int x_piece = (ch * kAwqChunkK + 32 * half) / 8;
#pragma unroll
        for (int t = 0; t < kTiles; ++t) {
          if (kTiles > 1 && t >= live_tiles) break;  // same for the whole warp
          // A generic load: x is global memory or, in awq_decode_linear.cu, shared.
          const uint4 xv = x_lane[t][x_piece];
          MmaBf16(even[jj][t], a0, xv.x, xv.y);
          MmaBf16(odd[jj][t], a1, xv.z, xv.w);
        }
      }
    }
#pragma unroll
    for (int jj = 0; jj < kLockstep; ++jj) {
      const int j = j0 + jj;
      if (kMayEndEarly && b0 + j * kScaleHalves / 2 >= blocks) break;
      const float sa = AwqRecordScale(v.rec[j].x), sb = AwqRecordScale(v.rec[j].y);
      if constexpr (kXSums) {
        // The mmas summed (128 + q) x over the unit: take (128 + z) times the
        // unit's x sum (columns 2c, 2c + 1) back out. In float32 the products
        // are exact and the sums lose ~2^-24 of 143 |x| a term, far below bf16.
        const float2 xs = *reinterpret_cast<const float2*>(x_sums + (ch * Chunk::kUnits + j) * 8 + 2 * c);
        const float zfa = Bf16Hi(v.rec[j].x), zfb = Bf16Hi(v.rec[j].y);
        acc[0][0] = fmaf(sa, fmaf(-zfa, xs.x, even[jj][0][0] + odd[jj][0][0]), acc[0][0]);
        acc[0][1] = fmaf(sa, fmaf(-zfa, xs.y, even[jj][0][1] + odd[jj][0][1]), acc[0][1]);
        acc[0][2] = fmaf(sb, fmaf(-zfb, xs.x, even[jj][0][2] + odd[jj][0][2]), acc[0][2]);
        acc[0][3] = fmaf(sb, fmaf(-zfb, xs.y, even[jj][0][3] + odd[jj][0][3]), acc[0][3]);
      } else {
#pragma unroll
        for (int t = 0; t < kTiles; ++t) {
          acc[t][0] = fmaf(sa, even[jj][t][0] + odd[jj][t][0], acc[t][0]);
          acc[t][1] = fmaf(sa, even[jj][t][1] + odd[jj][t][1], acc[t][1]);
          acc[t][2] = fmaf(sb, even[jj][t][2] + odd[jj][t][2], acc[t][2]);
          acc[t][3] = fmaf(sb, even[jj][t][3] + odd[jj][t][3], acc[t][3]);
        }
      }
    }
  }
}

// kWholeChunks: k is a multiple of kAwqChunkK (every ERNIE-4.5 linear), so
// no chunk is partial: the loop has no per-chunk test and the kMayEndEarly
// copy is not compiled (~20 - 33% of an int4 GEMV kernel's SASS). The
// 21B-A3B's batch-1 step went 3.5% faster (NOTES.md v39); smaller code alone
// did not pay elsewhere (v39: rolled loops, one kernel per epilogue). The
// launchers pick it from k.
template <int kTiles, int kScaleHalves, bool kXSums, int kLockstep = 1, bool kWholeChunks = false>
__device__ __forceinline__ void AwqComputeChunk(const AwqChunk<kScaleHalves>& v, int ch, int blocks,
                                                const uint4* const (&x_lane)[kTiles], const float* x_sums,
                                                int live_tiles, float (*acc)[4]) {
  if (kWholeChunks || (ch + 1) * kAwqChunkBlocks <= blocks) {
    AwqComputeChunkOf<kTiles, kScaleHalves, kXSums, false, kLockstep>(v, ch, blocks, x_lane, x_sums, live_tiles, acc);
  } else {
    AwqComputeChunkOf<kTiles, kScaleHalves, kXSums, true, kLockstep>(v, ch, blocks, x_lane, x_sums, live_tiles, acc);
  }
}

// Where this lane reads its x pieces: row 8t + g of x_row[t], or any_row
// for rows without data; `no_x` gets, per tile, the warp's ballot of those
// rows (bit 4j: x row 8t + j has no data).
template <int kTiles>
__device__ __forceinline__ void AwqLaneXRows(const __nv_bfloat16* const (&x_row)[kTiles],
                                             const __nv_bfloat16* any_row, const uint4* (&x_lane)[kTiles],
                                             unsigned (&no_x)[kTiles]) {
  const int c = threadIdx.x % 4;
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
    no_x[t] = __ballot_sync(0xffffffffu, x_row[t] == nullptr);
    x_lane[t] = reinterpret_cast<const uint4*>((x_row[t] != nullptr ? x_row[t] : any_row) + 8 * c);
  }
}

// Zeroes the accumulator columns of x rows without data (they read any_row).
template <int kTiles>
__device__ __forceinline__ void AwqZeroColumnsWithoutX(const unsigned (&no_x)[kTiles], float (*acc)[4]) {
  const int c = threadIdx.x % 4;
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
    if ((no_x[t] >> (8 * c)) & 1u) acc[t][0] = acc[t][2] = 0.0f;      // column 2c
    if ((no_x[t] >> (8 * c + 4)) & 1u) acc[t][1] = acc[t][3] = 0.0f;  // column 2c + 1
  }
}

// The warp's whole k slice (chunks slice, slice + k_slices, ...) of one
// 16-row tile into acc[t] (the D layout of linear_mma.cuh, rows of the tile
// by x rows 8t .. 8t+7).
//   tile_packed:  the tile's packed words, [k/64][32][4] (16-byte aligned)
//   tile_records: the tile's records, [8][groups2][2] (16-byte aligned)
//   x_row[t]:     this lane's row 8t + g of x ([k] bf16, 16-byte aligned,
//                 global or shared memory), or nullptr for a row of zeros
//   any_row:      k readable bf16 (16-byte aligned) that rows without x
//                 read instead: the loop has no branch per x load, and their
//                 columns of acc are zeroed at the end (column j of an mma's
//                 D depends on x row j alone, whatever the others hold)
//   live_tiles:   tiles t >= live_tiles are skipped (the same for the warp)
// Calls WaitForPrerequisiteGrids after the first weight loads (unless
// `wait` is false), then
// after_wait() (every thread of the CTA: a kernel's prologue that writes x
// may synchronise there, and may set x_row), then reads x_row and x. acc
// must hold zeros on entry.
//
// kXSums (one tile of staged rows): the mmas take 128 + q and the zero
// point comes off once a unit through x_sums ([unit][8] float32 sums of
// each x row over each unit, AwqXSumsBytes), one fewer instruction a weight
// pair.
//
// Instruction count is what holds this loop (ncu, 8192 x 8192, m = 1: 122
// instructions issued per 512 bytes of nibbles at 0.53 a scheduler cycle),
// so the loop body is branch-free: a chunk's loads are clamped to the last
// block rather than predicated, x rows without data read any_row, and the
// chunks rotate through kInFlight + 1
// register buffers, each computed and then refilled in place (no copies).
struct NothingAfterWait {
  __device__ void operator()() const {}
};

// The walk alone: the warp's chunks of its k slice of one tile (slice,
// slice + k_slices, ...) loaded into registers kInFlight ahead, the wait and
// after_wait() (as AwqAccumulateSlice says) after the first loads, then
// compute(v, ch) on each chunk v (its index along k ch) in order, each
// buffer refilled as soon as it is computed. AwqAccumulateSlice's math is
// one compute; tools/bench/cuda/stream_probe.cu's read-only probes run the
// same walk with an xor for the math.
template <int kScaleHalves, int kInFlight, typename AfterWait, typename Compute>
__device__ __forceinline__ void AwqWalkSlice(const uint32_t* tile_packed, const uint32_t* tile_records, int k,
                                             int group_shift, int slice, int k_slices, const AfterWait& after_wait,
                                             bool wait, const Compute& compute) {
  using Chunk = AwqChunk<kScaleHalves>;
  const int lane = threadIdx.x % 32, g = lane / 4;
  const int blocks = k / kAwqBlockK, chunks = AwqChunks(k), groups2 = AwqRecordGroups2(k, group_shift);
  const uint4* packed = reinterpret_cast<const uint4*>(tile_packed) + lane;
  // This lane's g: (rows g, g + 8) of group j at records[j].
  const uint2* records = reinterpret_cast<const uint2*>(tile_records) + g * groups2;
  const int my_chunks = slice < chunks ? DivBySlices(chunks - 1 - slice, k_slices) + 1 : 0;

  // Every address is clamped into the tile, even for chunks the loop never
  // loads: LoadStreaming16 is an asm statement without side effects, which
  // the compiler may hoist out of a branch (it did: a read a chunk before
  // the weights when a never-taken branch's index was -1).
  auto load = [&](int i, Chunk& v) {  // the slice's chunk i < my_chunks; blocks past k read the last one again
    const int ch = min(slice + i * k_slices, chunks - 1), b0 = ch * kAwqChunkBlocks;
#pragma unroll
    for (int u = 0; u < kAwqChunkBlocks; ++u) v.w[u] = LoadStreaming16(packed + min(b0 + u, blocks - 1) * 32);
#pragma unroll
    for (int j = 0; j < Chunk::kUnits; ++j)
      v.rec[j] = __ldg(records + (min(ch * kAwqChunkK + 32 * kScaleHalves * j, k - 1) >> group_shift));
  };
  // kInFlight chunks stay in flight while one is computed.
  constexpr int kBuffers = kInFlight + 1;
  Chunk buf[kBuffers];
#pragma unroll
  for (int d = 0; d < kBuffers; ++d)
    if (d < my_chunks) load(d, buf[d]);
  // x may come from the kernel before (wait false: the caller knows it is
  // ready without: the grouped GEMV's tiles that stage their own x).
  if (wait) WaitForPrerequisiteGrids();
  after_wait();
  for (int i = 0; i < my_chunks; i += kBuffers) {
#pragma unroll
    for (int d = 0; d < kBuffers; ++d) {
      if (i + d >= my_chunks) break;
      compute(buf[d], slice + (i + d) * k_slices);
      if (i + d + kBuffers < my_chunks) load(i + d + kBuffers, buf[d]);
    }
  }
}

template <int kTiles, int kScaleHalves, bool kXSums, int kInFlight = kAwqChunksInFlight<kTiles>,
          bool kWholeChunks = false, typename AfterWait = NothingAfterWait>
__device__ __forceinline__ void AwqAccumulateSlice(const uint32_t* tile_packed, const uint32_t* tile_records,
                                                   const __nv_bfloat16* const (&x_row)[kTiles],
                                                   const __nv_bfloat16* any_row, const float* x_sums, int live_tiles,
                                                   int k,
                                                   int group_shift, int slice, int k_slices, float (*acc)[4],
                                                   const AfterWait& after_wait = {}, bool wait = true) {
  static_assert(!kXSums || kTiles == 1, "unit sums are staged for one tile of x rows");
  constexpr int kLockstep = kAwqLockstepUnits<kTiles, kScaleHalves, kInFlight>;
  const int blocks = k / kAwqBlockK;
  const uint4* x_lane[kTiles];
  unsigned no_x[kTiles];
  AwqWalkSlice<kScaleHalves, kInFlight>(
      tile_packed, tile_records, k, group_shift, slice, k_slices,
      [&] {
        after_wait();
        // x_row is read only now: after_wait may set it (the grouped GEMV
        // learns which slots hold a row from the routing's table).
        AwqLaneXRows<kTiles>(x_row, any_row, x_lane, no_x);
      },
      wait,
      [&](const AwqChunk<kScaleHalves>& v, int ch) {
        AwqComputeChunk<kTiles, kScaleHalves, kXSums, kLockstep, kWholeChunks>(v, ch, blocks, x_lane, x_sums,
                                                                               live_tiles, acc);
      });
  AwqZeroColumnsWithoutX<kTiles>(no_x, acc);
}

}  // namespace ernie::cuda::kernels
