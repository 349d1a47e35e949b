// Grouped AWQ int4 expert GEMM (see grouped_awq_gemm.h). CTA: one routed
// tile of 16 kSlotTiles slots x eight packed 16-row tiles of its expert
// (awq_gemm.h's layout); four warps, each owning two packed tiles (32 weight
// rows) for every slot. The slots are the A operand of mma.m16n8k16 and the
// dequantised weight rows the B operand: a lane's 16-byte packed piece of a
// tile holds rows g and g + 8 for its k slots, which are exactly the B
// fragments of two 8-row mma tiles. The k order inside each 32-k half is
// awq_blocks.cuh's (step e, slots 2c, 2c+1: 8c + 4e + {0, 1}; slots 2c+8,
// 2c+9: 8c + 4e + {2, 3}), so a lane's A operand for a half is the 16 bytes
// of its slot row at 8c: one shared-memory load serves both k steps.
#include "engine/backend/cuda/kernels/awq_blocks.cuh"
#include "engine/backend/cuda/kernels/grouped_awq_gemm.h"
#include "engine/backend/cuda/kernels/grouped_gemm_epilogue.cuh"
#include "engine/backend/cuda/kernels/linear_mma.cuh"

namespace ernie::cuda {

namespace {

using kernels::kAwqBlockK;

constexpr int kCtaTiles = 8;  // packed 16-row tiles of a CTA (128 weight rows)
constexpr int kWarps = 4;     // two packed tiles each
constexpr int kThreads = 32 * kWarps;
constexpr int kStages = 4;                        // three 64-k blocks in flight while one is multiplied
constexpr int kTilePieces = 32;                   // 16-byte pieces of one packed tile's 64-k block (one per lane)
constexpr int kSlotPieces = kAwqBlockK * 2 / 16;  // 16-byte pieces of one slot row's 64-k block

template <int kSlotTiles>
constexpr int kStagePieces = kCtaTiles* kTilePieces + 16 * kSlotTiles* kSlotPieces;

// Shared bytes: the stages, then the records of the CTA's tiles for every
// group (per tile [8][groups2][2] words).
template <int kSlotTiles>
size_t SharedBytes(int groups2) {
  return size_t{kStages} * kStagePieces<kSlotTiles> * 16 + size_t{kCtaTiles} * 8 * groups2 * 8;
}

// Piece `chunk` (0..7) of slot row `row` in a stage. Rows 2q and 2q + 1 use
// opposite halves of the row's banks: one phase of a 16-byte load is 8
// lanes, slots g = 2q, 2q + 1 by pieces 4h + c, c = 0..3.
__device__ __forceinline__ int SlotPiece(int row, int chunk) { return row * kSlotPieces + (chunk ^ ((row & 1) << 2)); }

template <int kTileRows, int kScaleHalves>
__global__ void __launch_bounds__(kThreads) GroupedAwqGemmKernel(GroupedAwqGemvParams p, int group_shift) {
  extern __shared__ __align__(16) unsigned char shared_raw[];
  constexpr int kSlotTiles = kernels::kGroupedGemmSlotTiles<kTileRows>;
  // A down launch may start (p.dependent) once every CTA here has begun.
  kernels::AllowDependentLaunch();
  const int tile_index = blockIdx.y;
  // The whole CTA: the routing used fewer tiles. A dense launch has no tables (every tile expert 0).
  const int tiles = p.num_tiles != nullptr ? *p.num_tiles : static_cast<int>(gridDim.y);
  if (tile_index >= tiles) return;
  const int expert = p.tile_expert != nullptr ? p.tile_expert[tile_index] : 0;
  const int64_t slot0 = int64_t{tile_index} * kTileRows;
  // Slots of this tile that exist (a dense launch's last tile may be partial).
  const int tile_slots = p.rows > 0 ? static_cast<int>(min(int64_t{kTileRows}, p.rows - slot0)) : kTileRows;
  const int k = p.w.k, blocks = k / kAwqBlockK, groups2 = kernels::AwqRecordGroups2(k, group_shift);
  const int64_t row_tiles = (int64_t{p.w.n} + 15) / 16, tile0 = int64_t{blockIdx.x} * kCtaTiles;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  // Expert `expert`'s arrays: packed [row_tiles][blocks][32] pieces, records
  // [row_tiles][8][groups2] uint2 (rows g, g + 8).
  const auto* packed = reinterpret_cast<const uint4*>(p.w.packed + expert * row_tiles * 16 * (k / 8));
  const auto* records = reinterpret_cast<const uint4*>(p.w.records + expert * row_tiles * 16 * groups2);
  auto* stages = reinterpret_cast<uint4*>(shared_raw);
  uint4* records_s = stages + kStages * kStagePieces<kSlotTiles>;
  const auto* records_2 = reinterpret_cast<const uint2*>(records_s);  // [kCtaTiles][8][groups2]

  // Every record of the CTA's tiles, in the first block's copy group. Tiles
  // past the last (grid rounding) read the last one again; never stored.
  const int tile_record_pieces = 4 * groups2;
  for (int i = threadIdx.x; i < kCtaTiles * tile_record_pieces; i += kThreads) {
    const int64_t tile = min(tile0 + i / tile_record_pieces, row_tiles - 1);
    kernels::CpAsync16(records_s + i, records + tile * tile_record_pieces + i % tile_record_pieces);
  }
  // This thread copies pieces threadIdx.x and + kThreads of the CTA's
  // packed block, and piece `chunk` of slot rows copy_row + 16 i.
  const uint4* w_src[kCtaTiles * kTilePieces / kThreads];
#pragma unroll
  for (int i = 0; i < kCtaTiles * kTilePieces / kThreads; ++i) {
    const int piece = threadIdx.x + kThreads * i;
    w_src[i] = packed + min(tile0 + piece / kTilePieces, row_tiles - 1) * blocks * kTilePieces + piece % kTilePieces;
  }
  const int chunk = threadIdx.x % kSlotPieces, copy_row = threadIdx.x / kSlotPieces;
  const __nv_bfloat16* x_src[kSlotTiles];
#pragma unroll
  for (int i = 0; i < kSlotTiles; ++i) {
    x_src[i] = nullptr;  // padding slots and rows past the routed tile read zeros
    if (copy_row + 16 * i >= tile_slots) continue;
    const int64_t slot = slot0 + copy_row + 16 * i;
    const int64_t row = p.x_row != nullptr ? p.x_row[slot] : slot;
    if (row >= 0) x_src[i] = p.x + row * k + chunk * 8;
  }
  const kernels::GroupedWeightCopies<kTileRows> weight_copies(p.tile_expert, tiles, tile_index, expert);
  auto copy_weights = [&](int kb) {
    uint4* stage = stages + (kb % kStages) * kStagePieces<kSlotTiles>;
#pragma unroll
    for (int i = 0; i < kCtaTiles * kTilePieces / kThreads; ++i)
      weight_copies.Copy16(stage + threadIdx.x + kThreads * i, w_src[i] + kb * kTilePieces);
  };
  auto copy_slots = [&](int kb) {
    uint4* xs = stages + (kb % kStages) * kStagePieces<kSlotTiles> + kCtaTiles * kTilePieces;
#pragma unroll
    for (int i = 0; i < kSlotTiles; ++i) {
      const bool valid = x_src[i] != nullptr;
      kernels::CpAsync16OrZero(xs + SlotPiece(copy_row + 16 * i, chunk), valid ? x_src[i] + kb * kAwqBlockK : p.x,
                               valid);
    }
  };

  // acc: the scaled sums; part: the current scale unit's sums of exact
  // (q - z) x products, scaled once when the unit ends.
  float acc[kSlotTiles][4][4] = {}, part[kSlotTiles][4][4] = {};
  uint32_t zz[2][2] = {};  // 128 + z (both bf16 halves) of rows g, g + 8 of the warp's two tiles
  // The records come with block 0's copies (above), so they too are
  // requested before the wait and have landed once block 0 has.
  kernels::CpAsyncPipeline<kStages>(blocks, copy_weights, copy_slots, [&](int kb) {
    const uint4* stage = stages + (kb % kStages) * kStagePieces<kSlotTiles>;
    const uint4 pieces[2] = {stage[(2 * warp) * kTilePieces + lane], stage[(2 * warp + 1) * kTilePieces + lane]};
    const uint4* xs = stage + kCtaTiles * kTilePieces;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int half = 2 * kb + h, k0 = 32 * half, group = k0 >> group_shift;
      if ((k0 & ((1 << group_shift) - 1)) == 0) {  // a group starts: its zero points
#pragma unroll
        for (int tt = 0; tt < 2; ++tt) {
          const uint2 rec = records_2[((2 * warp + tt) * 8 + g) * groups2 + group];
          zz[tt][0] = __byte_perm(rec.x, 0, 0x3232);
          zz[tt][1] = __byte_perm(rec.y, 0, 0x3232);
        }
      }
      // b[j][q]: pair q of weight rows 8j .. 8j+7 (j = 2tt: rows g of packed
      // tile tt; 2tt + 1: rows g + 8); step e takes pairs 2e, 2e + 1.
      uint32_t b[4][4];
#pragma unroll
      for (int tt = 0; tt < 2; ++tt) {
        const uint32_t wa = kernels::AwqWordOf(pieces[tt], 2 * h), wb = kernels::AwqWordOf(pieces[tt], 2 * h + 1);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          b[2 * tt][q] = kernels::AwqDequantPair(wa, q, zz[tt][0]);
          b[2 * tt + 1][q] = kernels::AwqDequantPair(wb, q, zz[tt][1]);
        }
      }
#pragma unroll
      for (int t = 0; t < kSlotTiles; ++t) {
        const uint4 xa = xs[SlotPiece(16 * t + g, 4 * h + c)], xb = xs[SlotPiece(16 * t + g + 8, 4 * h + c)];
        const uint32_t a0[4] = {xa.x, xb.x, xa.y, xb.y}, a1[4] = {xa.z, xb.z, xa.w, xb.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          kernels::MmaBf16(part[t][j], a0, b[j][0], b[j][1]);
          kernels::MmaBf16(part[t][j], a1, b[j][2], b[j][3]);
        }
      }
      if ((half + 1) % kScaleHalves == 0) {  // the unit's scales: weight rows 8j + 2c + e of the warp
        float s[4][2];
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const uint2 rec = records_2[((2 * warp + j / 2) * 8 + 2 * c + e) * groups2 + group];
            s[j][e] = kernels::AwqRecordScale(j % 2 == 0 ? rec.x : rec.y);
          }
#pragma unroll
        for (int t = 0; t < kSlotTiles; ++t)
#pragma unroll
          for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int d = 0; d < 4; ++d) {
              acc[t][j][d] = fmaf(s[j][d % 2], part[t][j][d], acc[t][j][d]);
              part[t][j][d] = 0.0f;
            }
      }
    }
  });
  kernels::StoreGroupedGemmTile<kSlotTiles>(acc, p.w.n, slot0, tile_slots,
                                            int64_t{blockIdx.x} * kCtaTiles * 16 + 32 * warp, p.epilogue, p.y);
}

template <int kTileRows, int kScaleHalves>
cudaError_t LaunchTileRows(const GroupedAwqGemvParams& p, int group_shift, cudaStream_t stream) {
  constexpr auto kKernel = GroupedAwqGemmKernel<kTileRows, kScaleHalves>;
  // The device's whole per-block shared memory (the records' share grows
  // with k / group_size); each launch asks only what it needs.
  cudaError_t error = cudaSuccess;
  const int max_bytes = kernels::OptInToMaxDynamicShared<kKernel>(&error);
  if (error != cudaSuccess) return error;
  const size_t bytes =
      SharedBytes<kernels::kGroupedGemmSlotTiles<kTileRows>>(kernels::AwqRecordGroups2(p.w.k, group_shift));
  if (bytes > static_cast<size_t>(max_bytes)) return cudaErrorInvalidValue;
  const int64_t row_tiles = (int64_t{p.w.n} + 15) / 16;
  const dim3 grid(static_cast<unsigned>((row_tiles + kCtaTiles - 1) / kCtaTiles), static_cast<unsigned>(p.max_tiles));
  if (p.dependent) return kernels::LaunchDependent(kKernel, grid, dim3(kThreads), bytes, stream, p, group_shift);
  kKernel<<<grid, kThreads, bytes, stream>>>(p, group_shift);
  return cudaGetLastError();
}

template <int kScaleHalves>
cudaError_t LaunchForGroup(const GroupedAwqGemvParams& p, int group_shift, cudaStream_t stream) {
  switch (p.tile_rows) {
    case 8:
      return LaunchTileRows<8, kScaleHalves>(p, group_shift, stream);
    case 16:
      return LaunchTileRows<16, kScaleHalves>(p, group_shift, stream);
    case 32:
      return LaunchTileRows<32, kScaleHalves>(p, group_shift, stream);
    case 64:
      return LaunchTileRows<64, kScaleHalves>(p, group_shift, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

cudaError_t LaunchGroupedAwqGemm(const GroupedAwqGemvParams& p, cudaStream_t stream) {
  const int group_shift = CheckedGroupShift(p, /*tiled_gemm=*/true);
  // The GEMM keeps a tile's whole k in one CTA: a k split is the GEMV's alone, as are wait_first and
  // the folded routing.
  if (group_shift < 0 || p.k_slices != 0 || p.cta_warps != 0 || p.wait_first || p.route.on())
    return cudaErrorInvalidValue;
  if (kernels::AwqScaleHalves(p.w.group_size) == 4) return LaunchForGroup<4>(p, group_shift, stream);
  return LaunchForGroup<1>(p, group_shift, stream);
}

cudaError_t LaunchAwqTiledGemm(const AwqGemvParams& p, int tile_rows, cudaStream_t stream) {
  if (p.m < 1 || p.k_slices != 0 || p.loop != AwqGemvLoop::kAuto) return cudaErrorInvalidValue;
  if (tile_rows != 16 && tile_rows != 32 && tile_rows != 64) return cudaErrorInvalidValue;
  const int64_t tiles = (int64_t{p.m} + tile_rows - 1) / tile_rows;
  if (tiles > 65535) return cudaErrorInvalidValue;
  return LaunchGroupedAwqGemm(
      {.x = p.x,
       .w = {.packed = p.w.packed, .records = p.w.records, .experts = 1, .n = p.w.n, .k = p.w.k,
             .group_size = p.w.group_size},
       .y = p.y,
       .max_tiles = static_cast<int32_t>(tiles),
       .tile_rows = tile_rows,
       .epilogue = p.out == LinearOutput::kBf16 ? GroupedEpilogue::kStoreBf16 : GroupedEpilogue::kStoreF32,
       .rows = p.m},
      stream);
}

}  // namespace ernie::cuda
