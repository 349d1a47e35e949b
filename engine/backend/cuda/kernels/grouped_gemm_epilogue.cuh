// What both grouped expert GEMMs (grouped_expert_gemm.cu on bf16 weights,
// grouped_awq_gemm.cu on AWQ int4) share: the slot tiling, the L2 policy of
// their weight copies (GroupedWeightCopies), and the store of
// one warp's accumulators straight from registers (they do not split k).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/grouped_expert_gemv.h"
#include "engine/backend/cuda/kernels/linear_mma.cuh"

namespace ernie::cuda::kernels {

// 16-slot mma tiles holding a routed tile of kTileRows slots (8: half of one).
template <int kTileRows>
constexpr int kGroupedGemmSlotTiles = kTileRows < 16 ? 1 : kTileRows / 16;

// Whether routed tile `tile_index` is the only tile of the launch that
// multiplies its expert's weights: then they are read once a step and may
// stream under an L2 evict_first policy. An expert's tiles are adjacent (the
// alignment's scan of padded counts); a dense launch (no tile_expert) is one
// expert's `tiles` tiles. Other tiles of the same expert (a shared expert
// takes every token; a routed one past tile_rows tokens) read the weights
// again, from the L2 if the first reads left them there. `tiles`: the
// launch's used tiles, which the kernel has already read to know its own.
__device__ __forceinline__ bool OnlyTileOfItsExpert(const int32_t* tile_expert, int tiles, int tile_index,
                                                    int expert) {
  if (tile_expert == nullptr) return tiles == 1;
  return (tile_index == 0 || tile_expert[tile_index - 1] != expert) &&
         (tile_index + 1 >= tiles || tile_expert[tile_index + 1] != expert);
}

// A tile's 16-byte weight copies (cp.async into shared memory) under the L2
// policy measured fastest for its size. Tiles of up to 16 slots that alone
// read their expert's weights read them once a step: evict_first, so they do
// not push out the routed rows and partial sums the next launches read; the
// other tiles of up to 16 slots (an expert with several tiles) an explicit
// evict_normal, so those find the weights in the L2. Larger tiles take the
// plain copy, with no policy. 21B-A3B, device-greedy step ms, on an H200
// (NOTES.md v50): AWQ 64 rows (16-slot tiles) 7.675 - 7.682 with these
// policies (b03776d), 7.724 - 7.765 with none (14db31f), 7.808 with the plain
// copy where evict_first is not taken; AWQ 256 rows (64-slot tiles) 13.510 -
// 13.535 under evict_normal, 13.039 - 13.069 without (an explicit evict_normal
// is not the plain copy); bf16 64 rows 13.203 - 13.252 against 13.238 -
// 13.298 with none. On an H100 (v48 - v49) evict_first in every tile: AWQ 64
// rows 7.915 - 7.945 against 8.036 - 8.045, 256 rows 13.632 - 13.654 against
// 13.530 - 13.534. (At 16 rows the AWQ experts take the grouped GEMV, 8-slot
// tiles being below moe_grouped_gemm_min_rows.)
template <int kTileRows>
class GroupedWeightCopies {
 public:
  __device__ __forceinline__ GroupedWeightCopies(const int32_t* tile_expert, int tiles, int tile_index, int expert) {
    if constexpr (kSmallTiles) policy_ = L2StreamPolicy(OnlyTileOfItsExpert(tile_expert, tiles, tile_index, expert));
  }
  __device__ __forceinline__ void Copy16(void* smem, const void* gmem) const {
    if constexpr (kSmallTiles) {
      CpAsync16Hinted(smem, gmem, policy_);
    } else {
      CpAsync16(smem, gmem);
    }
  }
  // 16 zero bytes when !valid.
  __device__ __forceinline__ void Copy16OrZero(void* smem, const void* gmem, bool valid) const {
    if constexpr (kSmallTiles) {
      CpAsync16OrZeroHinted(smem, gmem, valid, policy_);
    } else {
      CpAsync16OrZero(smem, gmem, valid);
    }
  }

 private:
  static constexpr bool kSmallTiles = kTileRows <= 16;
  uint64_t policy_ = 0;
};

// acc[t][j]: the mma.m16n8k16 D fragments of slot tile t (slots slot0 + 16t
// + g, and + 8 for [2], [3]) by weight rows warp_row0 + 8j + 2c, + 1 (lane
// 4g + c), for the 32 weight rows a warp owns. Rows >= n and slots past the
// routed tile's `tile_rows` (an 8-slot tile in a 16-row mma tile) are
// dropped (`tile_rows` may be fewer than the tile's: the rows bound of a
// dense launch). y per
// `epilogue` (grouped_expert_gemv.h); for kSiluMulBf16 each 16 weight rows
// are 8 gate rows (tile 2jj) and the 8 up rows of the same features (tile
// 2jj + 1), so a lane holds both and no shared memory is needed.
template <int kSlotTiles>
__device__ __forceinline__ void StoreGroupedGemmTile(const float (&acc)[kSlotTiles][4][4], int64_t n, int64_t slot0,
                                                     int tile_rows, int64_t warp_row0, GroupedEpilogue epilogue,
                                                     void* out) {
  const int lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  if (epilogue == GroupedEpilogue::kStoreF32 || epilogue == GroupedEpilogue::kStoreBf16) {
    // Rows 2c, 2c + 1 of an 8-row tile are neighbours: one bf16 pair (kStoreBf16 is the AWQ
    // GEMM's, whose n is a multiple of 8); the bf16 experts' n may be odd.
#pragma unroll
    for (int t = 0; t < kSlotTiles; ++t)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          if (16 * t + g + 8 * half >= tile_rows) continue;
          const int64_t slot = slot0 + 16 * t + g + 8 * half, row = warp_row0 + 8 * j + 2 * c;
          if (row >= n) continue;
          const float a = acc[t][j][2 * half], b = acc[t][j][2 * half + 1];
          if (epilogue == GroupedEpilogue::kStoreF32) {
            auto* y = static_cast<float*>(out) + slot * n + row;
            y[0] = a;
            if (row + 1 < n) y[1] = b;
          } else {
            *reinterpret_cast<__nv_bfloat162*>(static_cast<__nv_bfloat16*>(out) + slot * n + row) =
                __floats2bfloat162_rn(a, b);
          }
        }
    return;
  }
  auto* y = static_cast<__nv_bfloat162*>(out);
  const int64_t pairs = n / 4;  // bf16 pairs of one slot's n / 2 outputs
#pragma unroll
  for (int t = 0; t < kSlotTiles; ++t)
#pragma unroll
    for (int jj = 0; jj < 2; ++jj) {
      const int64_t row16 = warp_row0 + 16 * jj;
      if (row16 >= n) continue;
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        if (16 * t + g + 8 * half >= tile_rows) continue;
        const float* gate = &acc[t][2 * jj][2 * half];
        const float* up = &acc[t][2 * jj + 1][2 * half];
        const int64_t slot = slot0 + 16 * t + g + 8 * half;
        y[slot * pairs + (row16 / 2 + 2 * c) / 2] =
            __floats2bfloat162_rn(Silu(gate[0]) * up[0], Silu(gate[1]) * up[1]);
      }
    }
}

}  // namespace ernie::cuda::kernels
