// y = x W^T for small m on the tensor cores (see gemv_bf16.h, linear_mma.cuh).
//
// Work split: a warp owns a tile of 16 rows of W (= 16 output features) and
// a k slice; a CTA of 8 warps holds 8 / k_slices tiles, each walked by
// k_slices warps whose partial sums meet in shared memory at the end. The
// walk along k is gemv_blocks.cuh's.
#include "engine/backend/cuda/kernels/gemv_bf16.h"
#include "engine/backend/cuda/kernels/gemv_blocks.cuh"
#include "engine/backend/cuda/kernels/linear_mma.cuh"

namespace ernie::cuda {

namespace {

using kernels::kGemvBlockK;
using kernels::kLinearWarps;

template <int kTiles>
__global__ void __launch_bounds__(32 * kLinearWarps) GemvBf16Kernel(GemvBf16Params p, int k_slices) {
  __shared__ float red[kLinearWarps * 16 * 8 * kTiles];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4;
  const int tile = warp / k_slices, slice = warp % k_slices;
  const int64_t cta_row0 = int64_t{blockIdx.x} * 16 * (kLinearWarps / k_slices);
  const int64_t row0 = cta_row0 + 16 * tile;
  // Rows past n (last tile) read row n-1 again; their sums are never stored.
  const int64_t last = p.n - 1;
  const __nv_bfloat16* wa = p.w + min(row0 + g, last) * p.k;
  const __nv_bfloat16* wb = p.w + min(row0 + g + 8, last) * p.k;
  const __nv_bfloat16* x_row[kTiles];
#pragma unroll
  for (int t = 0; t < kTiles; ++t) x_row[t] = 8 * t + g < p.m ? p.x + int64_t{8 * t + g} * p.k : nullptr;
  float acc[kTiles][4] = {};
  kernels::AccumulateSlice<kTiles>(wa, wb, x_row, (p.m + 7) / 8, p.k, slice, k_slices, acc);
  kernels::ReduceAndStore<kTiles>(acc, red, k_slices, cta_row0, p.n, p.m, p.y, p.out == LinearOutput::kBf16);
}

template <int kTiles>
cudaError_t LaunchTiles(const GemvBf16Params& p, cudaStream_t stream) {
  cudaError_t error = cudaSuccess;
  const int64_t resident = kernels::ResidentCtas<GemvBf16Kernel<kTiles>>(&error);
  if (error != cudaSuccess) return error;
  const int64_t row_tiles = (int64_t{p.n} + 15) / 16;
  const int k_slices =
      p.k_slices > 0 ? p.k_slices : kernels::PickKSlices(row_tiles, (p.k + kGemvBlockK - 1) / kGemvBlockK, resident);
  const int64_t tiles_per_cta = kLinearWarps / k_slices;
  const auto grid = static_cast<unsigned>((row_tiles + tiles_per_cta - 1) / tiles_per_cta);
  GemvBf16Kernel<kTiles><<<grid, 32 * kLinearWarps, 0, stream>>>(p, k_slices);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchGemvBf16(const GemvBf16Params& p, cudaStream_t stream) {
  if (p.x == nullptr || p.w == nullptr || p.y == nullptr || !kernels::Aligned16(p.x) || !kernels::Aligned16(p.w))
    return cudaErrorInvalidValue;
  if (p.m < 1 || p.m > kGemvMaxRows || p.n < 1 || p.k < 8 || p.k % 8 != 0) return cudaErrorInvalidValue;
  if (p.out != LinearOutput::kF32 && p.out != LinearOutput::kBf16) return cudaErrorInvalidValue;
  if (p.k_slices != 0 && p.k_slices != 1 && p.k_slices != 2 && p.k_slices != 4 && p.k_slices != 8)
    return cudaErrorInvalidValue;
  if (p.m <= 8) return LaunchTiles<1>(p, stream);
  if (p.m <= 16) return LaunchTiles<2>(p, stream);
  return LaunchTiles<4>(p, stream);
}

}  // namespace ernie::cuda
