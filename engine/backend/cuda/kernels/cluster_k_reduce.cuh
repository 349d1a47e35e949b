// The split-k sum and the epilogues of the small-batch GEMM
// (small_batch_gemm.cu): its CTAs own 64 weight rows and one k slice each;
// the slices of a row tile form a thread-block cluster (rank = slice, at
// most 8). The accumulators have mma.m16n8k16's D layout per 8 x rows (which
// is wgmma's m64nN accumulator, the tiles side by side): warp w's lane
// 4 g + c holds (weight row 16 w + g, x rows 8 t + 2 c + {0, 1}) in
// acc[t][0..1] and weight row 16 w + g + 8 in acc[t][2..3].
//
// x row m belongs to rank m % slices. Every CTA stores its partial sums
// grouped by owner into its own shared memory (StorePartialsByOwner), then
// sends each other owner its block with one bulk copy into the owner's
// receive area (slot = the sender's rank); each rank adds its rows' slots in
// rank order, its own block read where it stored it (SumAndFinish, so the
// result is deterministic), and writes them out.
// The mma.sync version before it stored every accumulator remotely (~600
// instructions a warp at 64 rows, NOTES.md v21); pulling instead took a
// second cluster barrier and a remote load's latency per output (v20).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "engine/backend/cuda/kernels/cluster_sync.cuh"
#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/decode_epilogue.cuh"
#include "engine/backend/cuda/kernels/small_batch_gemm.h"

namespace ernie::cuda::kernels {

constexpr int kReduceTileRows = 64;                // weight rows of a CTA
constexpr int kReduceMaxSlices = 8;                // CTAs of a cluster (a portable size)
constexpr int kPartStride = kReduceTileRows + 4;  // floats: a received row's length (4 apart in banks)
static_assert(kRowNormPartWidth == kReduceTileRows, "a split norm's partial sum is one CTA's weight rows");

// x rows a rank owns: ceil(x_rows / slices); its receive area holds them for every slice.
constexpr int OwnedRows(int slices, int x_rows) { return (x_rows + slices - 1) / slices; }

// The small-batch GEMM's CTAs arrive on the cluster barrier (cluster_sync.cuh)
// once their products are done (their receive areas reuse the operands'
// shared memory) and wait for every arrival before they send.

// This CTA's partial sums into its own `send` area, grouped by owner:
// owner o's block (OwnedRows x kPartStride floats, in the layout of its
// receive slot) at send + o x owned x kPartStride, x row m at row m / slices
// of block m % slices; padding rows too, so each block goes out as one bulk
// copy.
template <int kXTiles>
__device__ __forceinline__ void StorePartialsByOwner(const float (&acc)[kXTiles][4], float* send, int slices) {
  const int owned = OwnedRows(slices, 8 * kXTiles);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, c = lane % 4, r = 16 * warp + g;
  const int step_owner = 8 % slices, step_row = 8 / slices;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    int row_m = 2 * c + j, owner = row_m % slices, row = row_m / slices;
#pragma unroll
    for (int t = 0; t < kXTiles; ++t) {
      float* slot = send + (owner * owned + row) * kPartStride + r;
      slot[0] = acc[t][j];
      slot[8] = acc[t][j + 2];
      owner += step_owner, row += step_row;
      if (owner >= slices) owner -= slices, ++row;
    }
  }
}

// p.row_norm's r for each x row this rank owns (owned row mo: x row x_row0 +
// mo slices + rank) into row_scale, the partial sums of squares added in
// CTA order; threads of the CTA share the rows. The caller synchronises the
// CTA before SumAndFinish reads them.
template <int kThreads>
__device__ __forceinline__ void ComputeRowScales(const SmallBatchRowNorm& norm, float* row_scale, int owned,
                                                 int slices, int rank, int x_row0, int rows) {
  for (int mo = static_cast<int>(threadIdx.x); mo < owned; mo += kThreads) {
    const int m = x_row0 + mo * slices + rank;
    float sum = 0.0f;
    if (m < x_row0 + rows)
      for (int t = 0; t < norm.width / kRowNormPartWidth; ++t) sum += norm.sumsq[t * kRowNormSumsqStride + m];
    row_scale[mo] = rsqrtf(sum / static_cast<float>(norm.width) + norm.eps);
  }
}

// This rank's x rows: each output's slots summed in rank order (slot `rank`
// from `own`, this CTA's send block for its own rows), multiplied
// by the row's norm scale (row_scale, indexed by owned row; nullptr: none),
// the bias added, then p.epilogue's work (small_batch_gemm.h). A thread
// takes four consecutive weight rows of one x row (float4 loads of the
// slots). row0: the CTA's first weight row (kSiluMul: half_row0 its first
// gate row); valid_w: its weight rows inside n. The CTA covers x rows x_row0
// .. x_row0 + rows - 1 (x_rows: that count padded).
template <int kThreads>
__device__ __forceinline__ void SumAndFinish(const SmallBatchGemmParams& p, const float* receive, const float* own,
                                             const float* row_scale, int x_rows, int slices, int rank, int64_t row0,
                                             int64_t half_row0, int valid_w, int x_row0, int rows) {
  const int owned = OwnedRows(slices, x_rows);
  auto sum4 = [&](int mo, int r) {  // r a multiple of 4
    const int at = mo * kPartStride + r;
    auto slot = [&](int s) {
      return *reinterpret_cast<const float4*>(s == rank ? own + at : receive + s * owned * kPartStride + at);
    };
    float4 sum = slot(0);
    for (int s = 1; s < slices; ++s) {
      const float4 v = slot(s);
      sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
    }
    if (row_scale != nullptr) {
      const float scale = row_scale[mo];
      sum.x *= scale, sum.y *= scale, sum.z *= scale, sum.w *= scale;
    }
    return sum;
  };
  auto add_bias = [&](float4 v, int64_t n) {  // bias of rows n .. n + 3 (all inside p.n)
    if (p.bias != nullptr) v.x += p.bias[n], v.y += p.bias[n + 1], v.z += p.bias[n + 2], v.w += p.bias[n + 3];
    return v;
  };
  constexpr int kQuads = kReduceTileRows / 4;
  if (p.epilogue == SmallBatchEpilogue::kStore) {
    // Consecutive threads on consecutive weight rows (coalesced stores).
    for (int e = threadIdx.x; e < owned * kQuads; e += kThreads) {
      const int mo = e / kQuads, r = 4 * (e % kQuads), m = x_row0 + mo * slices + rank;
      if (m >= x_row0 + rows || r >= valid_w) continue;
      float4 v = sum4(mo, r);
      const int64_t out = int64_t{m} * p.n + row0 + r;
      if (r + 4 <= valid_w && p.n % 4 == 0) {  // the quad's four outputs, 16 (8) bytes aligned
        v = add_bias(v, row0 + r);
        if (p.out == LinearOutput::kBf16) {
          StoreBf16x4(static_cast<__nv_bfloat16*>(p.y) + out, v.x, v.y, v.z, v.w);
        } else {
          float4* y = reinterpret_cast<float4*>(static_cast<float*>(p.y) + out);
          if (p.accumulate) {
            const float4 old = *y;
            v.x += old.x, v.y += old.y, v.z += old.z, v.w += old.w;
          }
          *y = v;
        }
        continue;
      }
      const float quad[4] = {v.x, v.y, v.z, v.w};
      for (int i = 0; i < 4 && r + i < valid_w; ++i) {
        const float sum = quad[i] + (p.bias != nullptr ? p.bias[row0 + r + i] : 0.0f);
        if (p.out == LinearOutput::kBf16) {
          static_cast<__nv_bfloat16*>(p.y)[out + i] = __float2bfloat16(sum);
        } else if (p.accumulate) {
          static_cast<float*>(p.y)[out + i] += sum;
        } else {
          static_cast<float*>(p.y)[out + i] = sum;
        }
      }
    }
    return;
  }
  if (p.epilogue == SmallBatchEpilogue::kSiluMul) {
    // Gate rows j .. j + 3 (slots 0 - 31) with their up rows (slots 32 - 63).
    constexpr int kHalfQuads = kQuads / 2;
    for (int e = threadIdx.x; e < owned * kHalfQuads; e += kThreads) {
      const int mo = e / kHalfQuads, j = 4 * (e % kHalfQuads), m = x_row0 + mo * slices + rank;
      if (m >= x_row0 + rows) continue;
      const float4 g = add_bias(sum4(mo, j), half_row0 + j);
      const float4 u = add_bias(sum4(mo, kReduceTileRows / 2 + j), p.n / 2 + half_row0 + j);
      const float4 v = make_float4(Silu(g.x) * u.x, Silu(g.y) * u.y, Silu(g.z) * u.z, Silu(g.w) * u.w);
      const int64_t out = int64_t{m} * (p.n / 2) + half_row0 + j;  // n / 2 a multiple of 32
      if (p.out == LinearOutput::kBf16) {
        StoreBf16x4(static_cast<__nv_bfloat16*>(p.y) + out, v.x, v.y, v.z, v.w);
      } else {
        *reinterpret_cast<float4*>(static_cast<float*>(p.y) + out) = v;
      }
    }
    return;
  }
  if (p.epilogue == SmallBatchEpilogue::kAddResidualNorm) {
    // n % 64 == 0, so every quad is inside n. The 16 quads of an x row are
    // 16 consecutive threads (a half-warp), whose squares a shuffle sums;
    // every thread runs every round, so the shuffles see whole warps.
    const SmallBatchNormOut& norm = p.norm_out;
    float* sumsq = norm.sumsq + (row0 / kRowNormPartWidth) * kRowNormSumsqStride;
    for (int base = 0; base < owned * kQuads; base += kThreads) {
      const int e = base + static_cast<int>(threadIdx.x);
      const int mo = e / kQuads, r = 4 * (e % kQuads), m = x_row0 + mo * slices + rank;
      const bool live = e < owned * kQuads && m < x_row0 + rows;
      float squares = 0.0f;
      if (live) {
        const int64_t out = int64_t{m} * p.n + row0 + r;
        float4 v = add_bias(sum4(mo, r), row0 + r);
        float4* y = reinterpret_cast<float4*>(static_cast<float*>(p.y) + out);
        const float4 old = *y;
        v.x += old.x, v.y += old.y, v.z += old.z, v.w += old.w;
        *y = v;
        const float4 g = *reinterpret_cast<const float4*>(norm.weight + row0 + r);
        StoreBf16x4(norm.out + out, v.x * g.x, v.y * g.y, v.z * g.z, v.w * g.w);
        squares = v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
      }
#pragma unroll
      for (int offset = kQuads / 2; offset > 0; offset /= 2) squares += __shfl_xor_sync(0xffffffffu, squares, offset);
      if (live && r == 0) sumsq[m] = squares;
    }
    return;
  }
  // kRotaryKv: two rotary pairs a quad (n is even, so valid_w is too).
  for (int e = threadIdx.x; e < owned * kQuads; e += kThreads) {
    const int mo = e / kQuads, r = 4 * (e % kQuads), m = x_row0 + mo * slices + rank;
    if (m >= x_row0 + rows || r >= valid_w) continue;
    const float4 v = sum4(mo, r);
    auto bias = [&](int64_t n) { return p.bias != nullptr ? p.bias[n] : 0.0f; };
    const int64_t a = row0 + r;
    RotaryKvStore(p.rotary, static_cast<float*>(p.y), p.n, m, a, v.x + bias(a), v.y + bias(a + 1));
    if (r + 2 < valid_w)
      RotaryKvStore(p.rotary, static_cast<float*>(p.y), p.n, m, a + 2, v.z + bias(a + 2), v.w + bias(a + 3));
  }
}

}  // namespace ernie::cuda::kernels
