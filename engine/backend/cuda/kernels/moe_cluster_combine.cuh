// The end of a folded one-token down launch that combines its token's
// experts itself (GroupedAwqGemvParams::combine_into): the CTAs of one
// block of rows, one a choice's tile, form a thread-block cluster, and the
// weighted sum of their rows goes into the residual through distributed
// shared memory, so no combine launch (and no boundary between launches)
// follows the experts. The arithmetic is the combine kernel's
// (moe_routing.cu MoeCombineKernel) bit for bit: each choice's row as the
// plain store would have written it, summed in the choices' order from 0
// with `sum += w * e`, then added to the residual.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/backend/cuda/kernels/cluster_sync.cuh"
#include "engine/backend/cuda/kernels/linear_mma.cuh"
#include "engine/backend/cuda/kernels/moe_routing.h"
#include "engine/backend/cuda/kernels/tma.cuh"

namespace ernie::cuda::kernels {

constexpr int kClusterCombineMaxChoices = kMoeClusterCombineMaxChoices;

// What the combining CTAs know of the token's choices: each choice's tile
// (its CTA's rank in the cluster) and weight, in MoeRouteParams' order.
struct ClusterCombineChoices {
  int32_t tile[kClusterCombineMaxChoices];
  float weight[kClusterCombineMaxChoices];
};

__device__ __forceinline__ float LoadFromCluster(uint32_t cluster_address) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(cluster_address) : "memory");
  return v;
}

// Every thread of every CTA of the cluster calls it once, in place of the
// plain store (StoreGroupedTile's kStoreF32 at one slot): acc / red / k_slices
// as there, rows [cta_row0, cta_row0 + rows of the CTA) of n, the cluster
// (1, choices, 1) over the tiles so that a tile is its CTA's rank. Rank c
// sums rows c, c + choices, ... of the block over every tile and adds them
// to residual; the last barrier keeps each CTA's rows alive until every
// other CTA has read them.
__device__ __forceinline__ void CombineRowsInCluster(float (*acc)[4], float* red, int k_slices, int64_t cta_row0,
                                                     int64_t n, int choices, const ClusterCombineChoices& c,
                                                     float* residual) {
  __shared__ float rows[16 * kLinearWarps];  // this CTA's expert's rows (slot 0)
  StageAccumulators<1>(acc, red);
  const int rows_of_cta = 16 * (static_cast<int>(blockDim.x) / 32 / k_slices);
  for (int r = static_cast<int>(threadIdx.x); r < rows_of_cta; r += static_cast<int>(blockDim.x))
    rows[r] = StagedRowSum<1>(red, k_slices, r, 0);
  ClusterArriveRelease();
  ClusterWait();  // every tile's rows stored (and every CTA of the cluster running)
  const int rank = static_cast<int>(ClusterRank());
  for (int r = rank + choices * static_cast<int>(threadIdx.x); r < rows_of_cta;
       r += choices * static_cast<int>(blockDim.x)) {
    const int64_t row = cta_row0 + r;
    if (row >= n) continue;
    float e[kClusterCombineMaxChoices];
#pragma unroll
    for (int j = 0; j < kClusterCombineMaxChoices; ++j)  // every load out before the first add
      e[j] = j < choices ? LoadFromCluster(ClusterSharedAddress(&rows[r], static_cast<uint32_t>(c.tile[j]))) : 0.0f;
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < kClusterCombineMaxChoices; ++j)
      if (j < choices) sum += c.weight[j] * e[j];
    residual[row] = residual[row] + sum;
  }
  ClusterArriveRelease();
  ClusterWait();
}

}  // namespace ernie::cuda::kernels
