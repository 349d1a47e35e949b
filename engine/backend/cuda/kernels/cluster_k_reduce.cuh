// The split-k sum and the epilogues of the tensor-core GEMMs for decode-sized
// steps (small_batch_gemm.cu on mma.sync, warpgroup_gemm.cu on wgmma).
//
// Both give a CTA 64 weight rows and one k slice; the slices of a row tile
// form a thread-block cluster (rank = slice, at most 8). Their accumulators
// have one layout, mma.m16n8k16's D tile per 8 x rows: warp w's lane 4 g + c
// holds (weight row 16 w + g, x rows 8 t + 2 c + {0, 1}) in acc[t][0..1] and
// weight row 16 w + g + 8 in acc[t][2..3] (wgmma's m64nN accumulator is
// the same tiles side by side).
//
// The sum is pushed, not pulled: x row m belongs to rank m % slices, and
// every CTA stores its partial sums of row m into that rank's receive area
// (distributed shared memory, slot = its own rank); after one cluster barrier
// each rank adds its rows' slots in rank order (so the result is
// deterministic) from its own shared memory and writes them out. Pulling
// instead took a second barrier (no CTA may leave while another reads its
// shared memory) and a remote load's latency per output.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <cstdint>

#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/decode_epilogue.cuh"
#include "engine/backend/cuda/kernels/small_batch_gemm.h"

namespace ernie::cuda::kernels {

constexpr int kReduceTileRows = 64;                // weight rows of a CTA
constexpr int kReduceMaxSlices = 8;                // CTAs of a cluster (a portable size)
constexpr int kPartStride = kReduceTileRows + 4;  // floats: a received row's length (4 apart in banks)

// x rows a rank owns: ceil(x_rows / slices); its receive area holds them for every slice.
constexpr int OwnedRows(int slices, int x_rows) { return (x_rows + slices - 1) / slices; }
constexpr int64_t ReceiveBytes(int slices, int x_rows) {
  return int64_t{slices} * OwnedRows(slices, x_rows) * kPartStride * 4;
}

// Distributed shared memory may be written only once every CTA of the
// cluster runs: each CTA arrives, and PushPartials waits for every arrival
// before its first store. The small-batch GEMM arrives at its start, so the
// rule costs nothing; the warpgroup GEMM only once its products are done,
// because its receive area reuses the shared memory the operands sat in.
__device__ __forceinline__ void ClusterArrive() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}

// This CTA's partial sums (x rows below `m` only) into their owners' receive
// areas, then the cluster barrier after which every push has landed. `rank`
// is this CTA's slice; its x rows are 8 kXTiles (padded), `m` of them real.
template <int kXTiles>
__device__ __forceinline__ void PushPartials(const float (&acc)[kXTiles][4], float* receive, int m, int slices,
                                             int rank) {
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int owned = OwnedRows(slices, 8 * kXTiles);
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, c = lane % 4, r = 16 * warp + g;
  // Owner and row of x rows 2c + j + 8t, stepped along t without a
  // division each (slices is a runtime value: ~20 instructions a division).
  const int step_owner = 8 % slices, step_row = 8 / slices;
#pragma unroll
  for (int j = 0; j < 2; ++j) {  // x rows 8t + 2c + j: accumulators j and j + 2
    int row_m = 2 * c + j, owner = row_m % slices, row = row_m / slices;
#pragma unroll
    for (int t = 0; t < kXTiles; ++t) {
      if (row_m < m) {
        float* slot = cluster.map_shared_rank(receive, owner) + (rank * owned + row) * kPartStride + r;
        slot[0] = acc[t][j];
        slot[8] = acc[t][j + 2];
      }
      row_m += 8, owner += step_owner, row += step_row;
      if (owner >= slices) owner -= slices, ++row;
    }
  }
  cluster.sync();  // every push has landed (release / acquire across the cluster)
}

// This rank's x rows: each output's slots summed in rank order (adding +0.0f
// for absent slices keeps the bits), the bias added, then p.epilogue's work
// (small_batch_gemm.h). row0: the CTA's first weight row (kSiluMul:
// half_row0 its first gate row); valid_w: its weight rows inside n. The CTA
// covers x rows x_row0 .. x_row0 + rows - 1 (x_rows: that count padded).
template <int kThreads>
__device__ __forceinline__ void SumAndFinish(const SmallBatchGemmParams& p, const float* receive, int x_rows,
                                             int slices, int rank, int64_t row0, int64_t half_row0, int valid_w,
                                             int x_row0, int rows) {
  const int owned = OwnedRows(slices, x_rows);
  auto sum_of = [&](int mo, int r) {
    float parts[kReduceMaxSlices];
#pragma unroll
    for (int s = 0; s < kReduceMaxSlices; ++s)
      parts[s] = s < slices ? receive[(s * owned + mo) * kPartStride + r] : 0.0f;
    float sum = parts[0];
#pragma unroll
    for (int s = 1; s < kReduceMaxSlices; ++s) sum += parts[s];
    return sum;
  };
  auto bias = [&](int64_t n) { return p.bias != nullptr ? p.bias[n] : 0.0f; };
  if (p.epilogue == SmallBatchEpilogue::kStore) {
    // Consecutive threads on consecutive weight rows (coalesced stores).
    for (int e = threadIdx.x; e < owned * kReduceTileRows; e += kThreads) {
      const int mo = e / kReduceTileRows, r = e % kReduceTileRows, m = x_row0 + mo * slices + rank;
      if (m >= x_row0 + rows || r >= valid_w) continue;
      const float sum = sum_of(mo, r) + bias(row0 + r);
      const int64_t out = int64_t{m} * p.n + row0 + r;
      if (p.out == LinearOutput::kBf16) {
        static_cast<__nv_bfloat16*>(p.y)[out] = __float2bfloat16(sum);
      } else if (p.accumulate) {
        static_cast<float*>(p.y)[out] += sum;
      } else {
        static_cast<float*>(p.y)[out] = sum;
      }
    }
    return;
  }
  // kSiluMul and kRotaryKv: one thread per (x row, pair of sums).
  constexpr int kPairs = kReduceTileRows / 2;
  const bool silu = p.epilogue == SmallBatchEpilogue::kSiluMul;
  for (int e = threadIdx.x; e < owned * kPairs; e += kThreads) {
    const int mo = e / kPairs, j = e % kPairs, m = x_row0 + mo * slices + rank;
    if (m >= x_row0 + rows) continue;
    if (silu) {
      const float g = sum_of(mo, j) + bias(half_row0 + j), u = sum_of(mo, kPairs + j) + bias(p.n / 2 + half_row0 + j);
      const float v = Silu(g) * u;
      const int64_t out = int64_t{m} * (p.n / 2) + half_row0 + j;
      if (p.out == LinearOutput::kBf16) {
        static_cast<__nv_bfloat16*>(p.y)[out] = __float2bfloat16(v);
      } else {
        static_cast<float*>(p.y)[out] = v;
      }
    } else if (2 * j < valid_w) {
      const int64_t a = row0 + 2 * j;  // a rotary pair: even, and n is even
      RotaryKvStore(p.rotary, static_cast<float*>(p.y), p.n, m, a, sum_of(mo, 2 * j) + bias(a),
                    sum_of(mo, 2 * j + 1) + bias(a + 1));
    }
  }
}

}  // namespace ernie::cuda::kernels
