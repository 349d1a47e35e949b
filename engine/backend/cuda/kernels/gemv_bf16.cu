// y = x W^T for small m on the tensor cores (see gemv_bf16.h, linear_mma.cuh).
//
// Work split: a warp owns a tile of 16 rows of W (= 16 output features) and
// a k slice; a CTA of 8 warps holds 8 / k_slices tiles, each walked by
// k_slices warps whose partial sums meet in shared memory at the end.
// Along k the warp moves in blocks of 128: lane (g, c) reads the 32
// contiguous k values [32c, 32c + 32) of the block from rows g and g + 8 of
// its tile (four 16-byte loads each; 4 lanes cover 256 contiguous bytes of a
// row) and the same 32 values of x row g. Those 32 values feed the 8 mma
// k-steps of the block: step s gives slots (2c, 2c+1) the physical k
// 32c + 4s + {0, 1} and slots (2c+8, 2c+9) the k 32c + 4s + {2, 3}, in A and
// B alike, i.e. the 32-bit words 2s and 2s+1 of what the lane loaded.
#include "engine/backend/cuda/kernels/gemv_bf16.h"
#include "engine/backend/cuda/kernels/linear_mma.cuh"

namespace ernie::cuda {

namespace {

using kernels::kLinearWarps;

constexpr int kBlockK = 128;

__device__ __forceinline__ uint32_t WordOf(const uint4* v, int w) { return reinterpret_cast<const uint32_t*>(v)[w]; }

// The lane's 16-byte pieces of one 128-wide k block, rows g and g + 8.
// Pieces past k (k % 8 == 0 keeps a piece wholly in or out) and blocks past
// the slice's last read as zeros.
struct BlockWeights {
  uint4 a[4], b[4];
};

__device__ __forceinline__ void LoadBlock(const __nv_bfloat16* wa, const __nv_bfloat16* wb, int k, int k0, bool valid,
                                          BlockWeights& v) {
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int kk = k0 + 8 * i;
    const bool in = valid && kk < k;
    v.a[i] = in ? kernels::LoadStreaming16(wa + kk) : make_uint4(0, 0, 0, 0);
    v.b[i] = in ? kernels::LoadStreaming16(wb + kk) : make_uint4(0, 0, 0, 0);
  }
}

// One block into the accumulators (kTiles groups of 8 x rows). Even and odd
// k-steps go to separate accumulators, halving the chain of dependent mmas.
template <int kTiles>
__device__ __forceinline__ void ComputeBlock(const BlockWeights& v, const __nv_bfloat16* x, int k, int m, int k0, int g,
                                             float (*even)[4], float (*odd)[4]) {
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
    if (8 * t >= m) break;  // same for the whole warp
    const int row = 8 * t + g;
    uint4 xv[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int kk = k0 + 8 * i;
      xv[i] =
          row < m && kk < k ? __ldg(reinterpret_cast<const uint4*>(x + int64_t{row} * k + kk)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int s = 0; s < 8; ++s) {
      const uint32_t a[4] = {WordOf(v.a, 2 * s), WordOf(v.b, 2 * s), WordOf(v.a, 2 * s + 1), WordOf(v.b, 2 * s + 1)};
      kernels::MmaBf16(s % 2 == 0 ? even[t] : odd[t], a, WordOf(xv, 2 * s), WordOf(xv, 2 * s + 1));
    }
  }
}

template <int kTiles>
__global__ void __launch_bounds__(32 * kLinearWarps) GemvBf16Kernel(GemvBf16Params p, int k_slices) {
  __shared__ float red[kLinearWarps * 16 * 8 * kTiles];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int tile = warp / k_slices, slice = warp % k_slices;
  const int64_t cta_row0 = int64_t{blockIdx.x} * 16 * (kLinearWarps / k_slices);
  const int64_t row0 = cta_row0 + 16 * tile;
  // Rows past n (last tile) read row n-1 again; their sums are never stored.
  const int64_t last = p.n - 1;
  const __nv_bfloat16* wa = p.w + min(row0 + g, last) * p.k;
  const __nv_bfloat16* wb = p.w + min(row0 + g + 8, last) * p.k;
  float even[kTiles][4] = {}, odd[kTiles][4] = {};
  const int blocks = (p.k + kBlockK - 1) / kBlockK;
  // Software pipeline: the next block's loads are in flight while this one computes.
  BlockWeights cur, next;
  LoadBlock(wa, wb, p.k, slice * kBlockK + 32 * c, slice < blocks, cur);
  for (int b = slice; b < blocks; b += k_slices) {
    const int nb = b + k_slices;
    LoadBlock(wa, wb, p.k, nb * kBlockK + 32 * c, nb < blocks, next);
    ComputeBlock<kTiles>(cur, p.x, p.k, p.m, b * kBlockK + 32 * c, g, even, odd);
    cur = next;
  }
#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int i = 0; i < 4; ++i) even[t][i] += odd[t][i];
  kernels::ReduceAndStore<kTiles>(even, red, k_slices, cta_row0, p.n, p.m, p.y, p.out == LinearOutput::kBf16);
}

template <int kTiles>
cudaError_t LaunchTiles(const GemvBf16Params& p, cudaStream_t stream) {
  cudaError_t error = cudaSuccess;
  const int64_t resident = kernels::ResidentCtas<GemvBf16Kernel<kTiles>>(&error);
  if (error != cudaSuccess) return error;
  const int64_t row_tiles = (int64_t{p.n} + 15) / 16;
  const int k_slices =
      p.k_slices > 0 ? p.k_slices : kernels::PickKSlices(row_tiles, (p.k + kBlockK - 1) / kBlockK, resident);
  const int64_t tiles_per_cta = kLinearWarps / k_slices;
  const auto grid = static_cast<unsigned>((row_tiles + tiles_per_cta - 1) / tiles_per_cta);
  GemvBf16Kernel<kTiles><<<grid, 32 * kLinearWarps, 0, stream>>>(p, k_slices);
  return cudaGetLastError();
}

bool Aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

}  // namespace

cudaError_t LaunchGemvBf16(const GemvBf16Params& p, cudaStream_t stream) {
  if (p.x == nullptr || p.w == nullptr || p.y == nullptr || !Aligned16(p.x) || !Aligned16(p.w))
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
