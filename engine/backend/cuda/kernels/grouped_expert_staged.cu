// Grouped expert linears with the tile's activations in shared memory (see
// grouped_expert_staged.h). The weight side is gemv_blocks.cuh's: a warp's
// 16 rows in 128-wide k blocks, lane (g, c) holding k [32c, 32c + 32) of rows
// g and g + 8, the next block's loads in flight while one computes. The
// activation side reads the same 32 k of slot row g from shared memory.
#include <algorithm>

#include "engine/backend/cuda/kernels/gemv_blocks.cuh"
#include "engine/backend/cuda/kernels/grouped_expert_staged.h"
#include "engine/backend/cuda/kernels/linear_mma.cuh"

namespace ernie::cuda {

namespace {

using kernels::BlockWeights;
using kernels::kGemvBlockK;
using kernels::kLinearWarps;

// Elements between staged rows: k rounded up to whole 128-wide blocks (the
// swizzle permutes within a block), plus 16 bytes so that consecutive rows
// start one bank group apart.
__host__ __device__ inline int64_t StagedStride(int32_t k) {
  return (int64_t{k} + kGemvBlockK - 1) / kGemvBlockK * kGemvBlockK + 8;
}

// Where 16-byte piece j (k 8j .. 8j+7) of a row is stored. Lane (g, c) reads
// pieces 16b + 4c + i (i = 0..3) in load i; lanes c and c + 2 would hit the
// same banks 128 bytes apart, so the upper half of each block has bit 1 of
// its piece index flipped. With the row stride's 16-byte offset, the 8 lanes
// of each quarter-warp then touch 8 different bank groups.
__device__ __forceinline__ int SwizzledPiece(int j) { return j ^ (((j >> 3) & 1) << 1); }

// One 128-wide block of the warp's 16 rows against the tile's kTiles x 8
// staged rows.
template <int kTiles>
__device__ __forceinline__ void ComputeStagedBlock(const BlockWeights& v, const __nv_bfloat16* xs, int64_t stride,
                                                   int k, int k0, float (*even)[4], float (*odd)[4]) {
  const int g = (threadIdx.x % 32) / 4;
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
    const __nv_bfloat16* row = xs + (8 * t + g) * stride;
    uint4 xv[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int kk = k0 + 8 * i;
      xv[i] = kk < k ? *reinterpret_cast<const uint4*>(row + 8 * SwizzledPiece(kk / 8)) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int s = 0; s < 8; ++s) {
      const uint32_t a[4] = {kernels::WordOf(v.a, 2 * s), kernels::WordOf(v.b, 2 * s),
                             kernels::WordOf(v.a, 2 * s + 1), kernels::WordOf(v.b, 2 * s + 1)};
      kernels::MmaBf16(s % 2 == 0 ? even[t] : odd[t], a, kernels::WordOf(xv, 2 * s), kernels::WordOf(xv, 2 * s + 1));
    }
  }
}

// Grid (row chunks, max_tiles), kLinearWarps warps; dynamic shared memory
// GroupedExpertStagedBytes. Warp w takes the chunk's 16-row groups w,
// w + kLinearWarps, ...
template <int kTiles>
__global__ void __launch_bounds__(32 * kLinearWarps) GroupedExpertStagedKernel(GroupedExpertGemvParams p,
                                                                               int rows_per_cta) {
  extern __shared__ __align__(16) unsigned char staged_raw[];
  auto* xs = reinterpret_cast<__nv_bfloat16*>(staged_raw);  // [8 kTiles][StagedStride(k)]
  constexpr int kRows = 8 * kTiles;
  const int tile_index = blockIdx.y;
  if (tile_index >= *p.num_tiles) return;  // the whole CTA: the routing used fewer tiles
  const int expert = p.tile_expert[tile_index];
  const int64_t slot0 = int64_t{tile_index} * kRows;
  const int64_t stride = StagedStride(p.k);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;

  // The tile's activation rows (padding slots: zeros), piece by piece.
  const int pieces = p.k / 8;
  for (int idx = threadIdx.x; idx < kRows * pieces; idx += blockDim.x) {
    const int r = idx / pieces, j = idx % pieces;
    const int64_t slot = slot0 + r;
    const int64_t row = p.x_row != nullptr ? p.x_row[slot] : slot;
    __nv_bfloat16* dst = xs + r * stride + 8 * SwizzledPiece(j);
    if (row >= 0) {
      kernels::CpAsync16(dst, p.x + row * p.k + 8 * j);
    } else {
      *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
    }
  }
  kernels::CpAsyncCommit();

  const __nv_bfloat16* w = p.w + int64_t{expert} * p.n * p.k;
  const int64_t last = p.n - 1;  // rows past n read row n-1 again; never stored
  const int64_t chunk_end = std::min<int64_t>(p.n, int64_t{blockIdx.x + 1} * rows_per_cta);
  const int blocks = (p.k + kGemvBlockK - 1) / kGemvBlockK;
  auto row_a = [&](int64_t row0) { return w + min(row0 + g, last) * p.k; };
  auto row_b = [&](int64_t row0) { return w + min(row0 + g + 8, last) * p.k; };
  const int64_t first_row0 = int64_t{blockIdx.x} * rows_per_cta + 16 * warp;
  BlockWeights cur, next;
  // The warp's first weight block loads while the staging completes.
  if (first_row0 < chunk_end) kernels::LoadBlock(row_a(first_row0), row_b(first_row0), p.k, 32 * c, true, cur);
  kernels::CpAsyncWait<0>();
  __syncthreads();
  for (int64_t row0 = first_row0; row0 < chunk_end; row0 += 16 * kLinearWarps) {
    const __nv_bfloat16* wa = row_a(row0);
    const __nv_bfloat16* wb = row_b(row0);
    float even[kTiles][4] = {}, odd[kTiles][4] = {};
    if (row0 != first_row0) kernels::LoadBlock(wa, wb, p.k, 32 * c, true, cur);
    for (int b = 0; b < blocks; ++b) {
      kernels::LoadBlock(wa, wb, p.k, (b + 1) * kGemvBlockK + 32 * c, b + 1 < blocks, next);
      ComputeStagedBlock<kTiles>(cur, xs, stride, p.k, b * kGemvBlockK + 32 * c, even, odd);
      cur = next;
    }
#pragma unroll
    for (int t = 0; t < kTiles; ++t)
#pragma unroll
      for (int i = 0; i < 4; ++i) even[t][i] += odd[t][i];

    // even[t]: rows row0 + g (d0, d1) and row0 + g + 8 (d2, d3), slots 8t + 2c, + 1.
    if (p.epilogue == GroupedEpilogue::kStoreF32) {
      auto* y = static_cast<float*>(p.y);
#pragma unroll
      for (int t = 0; t < kTiles; ++t)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int64_t slot = slot0 + 8 * t + 2 * c + e;
          if (row0 + g < p.n) y[slot * p.n + row0 + g] = even[t][e];
          if (row0 + g + 8 < p.n) y[slot * p.n + row0 + g + 8] = even[t][2 + e];
        }
    } else {
      // Rows row0 .. row0+7 are gate features row0/2 + g, rows row0+8 .. their up.
      auto* y = static_cast<__nv_bfloat16*>(p.y);
      const int64_t width = p.n / 2;
#pragma unroll
      for (int t = 0; t < kTiles; ++t)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int64_t slot = slot0 + 8 * t + 2 * c + e;
          const float gate = even[t][e], up = even[t][2 + e];
          y[slot * width + row0 / 2 + g] = __float2bfloat16(gate / (1.0f + expf(-gate)) * up);
        }
    }
  }
}

template <int kTiles>
cudaError_t LaunchTiles(const GroupedExpertGemvParams& p, cudaStream_t stream) {
  const auto bytes = static_cast<size_t>(GroupedExpertStagedBytes(p.tile_rows, p.k));
  auto* kernel = GroupedExpertStagedKernel<kTiles>;
  if (const cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(bytes));
      e != cudaSuccess)
    return e;
  int device = 0, sms = 0, per_sm = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (const cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device); e != cudaSuccess)
    return e;
  if (const cudaError_t e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, 32 * kLinearWarps, bytes);
      e != cudaSuccess)
    return e;
  // Row chunks so that the tiles the host expects fill the resident CTAs
  // about once; each chunk a whole number of 16-row groups.
  const int64_t groups = (int64_t{p.n} + 15) / 16;
  const int64_t tiles = p.expected_tiles > 0 ? p.expected_tiles : p.max_tiles;
  const int64_t resident = int64_t{sms} * std::max(per_sm, 1);
  const int64_t chunks = std::clamp<int64_t>((resident + tiles - 1) / tiles, 1, std::max<int64_t>(1, groups / 4));
  const int64_t rows_per_cta = (groups + chunks - 1) / chunks * 16;
  const dim3 grid(static_cast<unsigned>((p.n + rows_per_cta - 1) / rows_per_cta), static_cast<unsigned>(p.max_tiles));
  kernel<<<grid, 32 * kLinearWarps, bytes, stream>>>(p, static_cast<int>(rows_per_cta));
  return cudaGetLastError();
}

}  // namespace

int64_t GroupedExpertStagedBytes(int32_t tile_rows, int32_t k) {
  return int64_t{tile_rows} * StagedStride(k) * 2;
}

bool GroupedExpertStagedFits(int32_t tile_rows, int32_t k) {
  if (tile_rows != 16 && tile_rows != 32 && tile_rows != 64) return false;
  int device = 0, optin = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess)
    return false;
  return GroupedExpertStagedBytes(tile_rows, k) <= optin;
}

cudaError_t LaunchGroupedExpertStaged(const GroupedExpertGemvParams& p, cudaStream_t stream) {
  if (p.x == nullptr || p.w == nullptr || p.y == nullptr || p.tile_expert == nullptr || p.num_tiles == nullptr ||
      !kernels::Aligned16(p.x) || !kernels::Aligned16(p.w))
    return cudaErrorInvalidValue;
  if (p.n < 1 || p.k < 8 || p.k % 8 != 0 || p.max_tiles < 1 || p.max_tiles > 65535) return cudaErrorInvalidValue;
  if (p.epilogue == GroupedEpilogue::kSiluMulBf16 && p.n % 16 != 0) return cudaErrorInvalidValue;
  if (p.epilogue != GroupedEpilogue::kStoreF32 && p.epilogue != GroupedEpilogue::kSiluMulBf16)
    return cudaErrorInvalidValue;
  if (!GroupedExpertStagedFits(p.tile_rows, p.k)) return cudaErrorInvalidValue;
  switch (p.tile_rows) {
    case 16: return LaunchTiles<2>(p, stream);
    case 32: return LaunchTiles<4>(p, stream);
    case 64: return LaunchTiles<8>(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace ernie::cuda
