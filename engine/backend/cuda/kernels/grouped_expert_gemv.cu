// Grouped expert linears (see grouped_expert_gemv.h). The work split is
// gemv_bf16.cu's along n (a warp owns 16 weight rows and a k slice), with a
// second grid dimension over the routed tiles.
#include <algorithm>

#include "engine/backend/cuda/kernels/gemv_blocks.cuh"
#include "engine/backend/cuda/kernels/grouped_epilogue.cuh"
#include "engine/backend/cuda/kernels/grouped_expert_gemv.h"
#include "engine/backend/cuda/kernels/linear_mma.cuh"

namespace ernie::cuda {

namespace {

using kernels::kGemvBlockK;
using kernels::kLinearWarps;

template <int kTiles>
__global__ void __launch_bounds__(32 * kLinearWarps) GroupedExpertGemvKernel(GroupedExpertGemvParams p, int k_slices) {
  __shared__ float red[kLinearWarps * 16 * 8 * kTiles];
  const int tile_index = blockIdx.y;
  if (tile_index >= *p.num_tiles) return;  // the whole CTA: the routing used fewer tiles
  const int expert = p.tile_expert[tile_index];
  const int64_t slot0 = int64_t{tile_index} * 8 * kTiles;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4;
  const int tile = warp / k_slices, slice = warp % k_slices;
  const int64_t cta_row0 = int64_t{blockIdx.x} * 16 * (kLinearWarps / k_slices);
  const int64_t row0 = cta_row0 + 16 * tile;
  const __nv_bfloat16* w = p.w + int64_t{expert} * p.n * p.k;
  const int64_t last = p.n - 1;  // rows past n read row n-1 again; never stored
  const __nv_bfloat16* wa = w + min(row0 + g, last) * p.k;
  const __nv_bfloat16* wb = w + min(row0 + g + 8, last) * p.k;
  const __nv_bfloat16* x_row[kTiles];
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
    const int64_t slot = slot0 + 8 * t + g;
    const int64_t row = p.x_row != nullptr ? p.x_row[slot] : slot;
    x_row[t] = row >= 0 ? p.x + row * p.k : nullptr;
  }
  float acc[kTiles][4] = {};
  kernels::AccumulateSlice<kTiles>(wa, wb, x_row, kTiles, p.k, slice, k_slices, acc);

  kernels::StoreGroupedTile<kTiles>(acc, red, k_slices, cta_row0, p.n, slot0, p.epilogue, p.y);
}

template <int kTiles>
cudaError_t LaunchTiles(const GroupedExpertGemvParams& p, cudaStream_t stream) {
  cudaError_t error = cudaSuccess;
  const int64_t resident = kernels::ResidentCtas<GroupedExpertGemvKernel<kTiles>>(&error);
  if (error != cudaSuccess) return error;
  const int64_t row_tiles = (int64_t{p.n} + 15) / 16;
  const int64_t tiles = p.expected_tiles > 0 ? p.expected_tiles : p.max_tiles;
  // The k split is sized for the tiles the host expects to run; each gets
  // its share of the resident CTAs.
  const int k_slices =
      kernels::PickKSlices(row_tiles, (p.k + kGemvBlockK - 1) / kGemvBlockK, std::max<int64_t>(1, resident / tiles));
  const int64_t tiles_per_cta = kLinearWarps / k_slices;
  const dim3 grid(static_cast<unsigned>((row_tiles + tiles_per_cta - 1) / tiles_per_cta),
                  static_cast<unsigned>(p.max_tiles));
  GroupedExpertGemvKernel<kTiles><<<grid, 32 * kLinearWarps, 0, stream>>>(p, k_slices);
  return cudaGetLastError();
}

}  // namespace

bool GroupedExpertParamsValid(const GroupedExpertGemvParams& p) {
  if (p.x == nullptr || p.w == nullptr || p.y == nullptr || p.tile_expert == nullptr || p.num_tiles == nullptr ||
      !kernels::Aligned16(p.x) || !kernels::Aligned16(p.w))
    return false;
  if (p.n < 1 || p.k < 8 || p.k % 8 != 0 || p.max_tiles < 1 || p.max_tiles > 65535) return false;
  if (p.epilogue == GroupedEpilogue::kSiluMulBf16 && p.n % 16 != 0) return false;
  return p.epilogue == GroupedEpilogue::kStoreF32 || p.epilogue == GroupedEpilogue::kSiluMulBf16;
}

cudaError_t LaunchGroupedExpertGemv(const GroupedExpertGemvParams& p, cudaStream_t stream) {
  // The GEMV does not wait for a kernel before it: `dependent` is the GEMMs' alone.
  if (!GroupedExpertParamsValid(p) || p.dependent) return cudaErrorInvalidValue;
  switch (p.tile_rows) {
    case 8: return LaunchTiles<1>(p, stream);
    case 16: return LaunchTiles<2>(p, stream);
    case 32: return LaunchTiles<4>(p, stream);
    case 64: return LaunchTiles<8>(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace ernie::cuda
