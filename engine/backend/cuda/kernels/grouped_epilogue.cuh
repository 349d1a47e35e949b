// The end of both grouped expert kernels (grouped_expert_gemv.cu on bf16
// weights, grouped_awq_gemv.cu on AWQ int4): the CTA's cross-warp sum and
// the store of one tile's slots, per GroupedEpilogue.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "engine/backend/cuda/kernels/grouped_expert_gemv.h"
#include "engine/backend/cuda/kernels/linear_mma.cuh"

namespace ernie::cuda::kernels {

// acc: each warp's partial sums (StageAccumulators' layout) for weight rows
// [cta_row0, cta_row0 + 16 warps / k_slices) (the CTA's warps) and the tile's slots
// [slot0, slot0 + 8 kTiles); red: shared memory of kLinearWarps * 16 * 8 *
// kTiles floats. Rows >= n are dropped. y per `epilogue`:
//   kStoreF32:    float [slots, n]
//   kSiluMulBf16: bf16 [slots, n / 2], rows 16i + j (j < 8) the gate of
//                 feature 8i + j and rows 16i + j + 8 its up.
template <int kTiles>
__device__ __forceinline__ void StoreGroupedTile(float (*acc)[4], float* red, int k_slices, int64_t cta_row0,
                                                 int64_t n, int64_t slot0, GroupedEpilogue epilogue, void* y) {
  constexpr int kRows = 8 * kTiles;
  StageAccumulators<kTiles>(acc, red);
  const int rows_of_cta = 16 * (static_cast<int>(blockDim.x) / 32 / k_slices);
  if (epilogue == GroupedEpilogue::kStoreF32) {
    auto* out = static_cast<float*>(y);
    for (int i = threadIdx.x; i < rows_of_cta * kRows; i += blockDim.x) {
      const int m = i / rows_of_cta, r = i % rows_of_cta;  // consecutive threads: consecutive n
      const int64_t row = cta_row0 + r;
      if (row < n) out[(slot0 + m) * n + row] = StagedRowSum<kTiles>(red, k_slices, r, m);
    }
    return;
  }
  auto* out = static_cast<__nv_bfloat16*>(y);
  const int64_t width = n / 2;
  const int features_of_cta = rows_of_cta / 2;
  for (int i = threadIdx.x; i < features_of_cta * kRows; i += blockDim.x) {
    const int m = i / features_of_cta, f = i % features_of_cta;
    const int r = (f / 8) * 16 + f % 8;
    if (cta_row0 + r >= n) continue;
    const float gate = StagedRowSum<kTiles>(red, k_slices, r, m);
    const float up = StagedRowSum<kTiles>(red, k_slices, r + 8, m);
    out[(slot0 + m) * width + cta_row0 / 2 + f] = __float2bfloat16(kernels::Silu(gate) * up);
  }
}

}  // namespace ernie::cuda::kernels
