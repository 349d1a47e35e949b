// Grouped expert GEMM (see grouped_expert_gemm.h). CTA: one routed tile of
// kTileRows slots (in kSlotTiles mma tiles of 16; an 8-slot tile fills half
// of one with zeros) x kCtaRows weight rows of its expert; four
// warps, each owning 32 weight rows for every slot of the tile. Both
// operands have k contiguous (x [slots, k], W [n, k]), so a 64-k block is
// one 128-byte shared-memory row per slot or weight row, read by ldmatrix
// straight into mma.m16n8k16 fragments: the slots are the A operand, the
// weight rows the B operand, accumulators float32.

#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/grouped_expert_gemm.h"
#include "engine/backend/cuda/kernels/grouped_gemm_epilogue.cuh"
#include "engine/backend/cuda/kernels/linear_mma.cuh"

namespace ernie::cuda {

namespace {

constexpr int kBlockK = 64;           // k of one pipeline stage: a 128-byte row
constexpr int kChunks = kBlockK / 8;  // 16-byte pieces of a row
constexpr int kCtaRows = 128;         // weight rows (outputs) of a CTA
constexpr int kWarps = 4;             // 32 weight rows each
constexpr int kThreads = 32 * kWarps;
constexpr int kStages = 4;  // three blocks in flight while one is multiplied
// Rows one pass of the CTA's threads copies (kThreads / kChunks).
constexpr int kCopyRows = kThreads / kChunks;

template <int kSlotTiles>
constexpr size_t StageElems() {
  return size_t{kCtaRows + 16 * kSlotTiles} * kBlockK;
}
template <int kSlotTiles>
constexpr size_t SharedBytes() {
  return kStages * StageElems<kSlotTiles>() * sizeof(__nv_bfloat16);
}

// Element offset of 16-byte piece `chunk` of shared row `row`. The pieces
// are XOR-swizzled by row, so that ldmatrix's eight row reads of one piece
// column fall on eight different bank groups.
__device__ __forceinline__ int Swizzled(int row, int chunk) { return row * kBlockK + ((chunk ^ (row & 7)) * 8); }

template <int kTileRows>
__global__ void __launch_bounds__(kThreads) GroupedExpertGemmKernel(GroupedExpertGemvParams p) {
  constexpr int kSlotTiles = kernels::kGroupedGemmSlotTiles<kTileRows>;
  extern __shared__ __align__(16) unsigned char shared_raw[];
  auto* smem = reinterpret_cast<__nv_bfloat16*>(shared_raw);
  constexpr int kRows = 16 * kSlotTiles;
  constexpr int kWeightCopies = kCtaRows / kCopyRows, kSlotCopies = kRows / kCopyRows;
  // A down launch may start (p.dependent) once every CTA here has begun.
  kernels::AllowDependentLaunch();
  const int tile_index = blockIdx.y;
  const int tiles = *p.num_tiles;
  if (tile_index >= tiles) return;  // the whole CTA: the routing used fewer tiles
  const int expert = p.tile_expert[tile_index];
  const int64_t slot0 = int64_t{tile_index} * kTileRows;
  const int64_t n0 = int64_t{blockIdx.x} * kCtaRows;
  const int64_t k = p.k;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  // This thread copies piece `chunk` of rows copy_row + kCopyRows i, of the
  // weights and of the slots. Weight rows past n read row n - 1 (never
  // stored); padding slots (x_row -1) and k past the end read zeros.
  const int chunk = threadIdx.x % kChunks, copy_row = threadIdx.x / kChunks;
  const __nv_bfloat16* w = p.w + int64_t{expert} * p.n * k + chunk * 8;
  const __nv_bfloat16* w_src[kWeightCopies];
#pragma unroll
  for (int i = 0; i < kWeightCopies; ++i) w_src[i] = w + min(n0 + copy_row + kCopyRows * i, int64_t{p.n} - 1) * k;
  const __nv_bfloat16* x_src[kSlotCopies];
#pragma unroll
  for (int i = 0; i < kSlotCopies; ++i) {
    x_src[i] = nullptr;  // rows past the routed tile read zeros
    if (copy_row + kCopyRows * i >= kTileRows) continue;
    const int64_t slot = slot0 + copy_row + kCopyRows * i;
    const int64_t row = p.x_row != nullptr ? p.x_row[slot] : slot;
    if (row >= 0) x_src[i] = p.x + row * k + chunk * 8;
  }
  const int k_blocks = static_cast<int>((k + kBlockK - 1) / kBlockK);
  const kernels::GroupedWeightCopies<kTileRows> weight_copies(p.tile_expert, tiles, tile_index, expert);
  auto copy_weights = [&](int kb) {
    __nv_bfloat16* ws = smem + (kb % kStages) * StageElems<kSlotTiles>();
    const int64_t k0 = int64_t{kb} * kBlockK;
    const bool in_k = k0 + chunk * 8 < k;
#pragma unroll
    for (int i = 0; i < kWeightCopies; ++i)
      weight_copies.Copy16OrZero(ws + Swizzled(copy_row + kCopyRows * i, chunk), in_k ? w_src[i] + k0 : p.w, in_k);
  };
  auto copy_slots = [&](int kb) {
    __nv_bfloat16* xs = smem + (kb % kStages) * StageElems<kSlotTiles>() + kCtaRows * kBlockK;
    const int64_t k0 = int64_t{kb} * kBlockK;
    const bool in_k = k0 + chunk * 8 < k;
#pragma unroll
    for (int i = 0; i < kSlotCopies; ++i) {
      const bool valid = in_k && x_src[i] != nullptr;
      kernels::CpAsync16OrZero(xs + Swizzled(copy_row + kCopyRows * i, chunk), valid ? x_src[i] + k0 : p.x, valid);
    }
  };

  float acc[kSlotTiles][4][4] = {};
  kernels::CpAsyncPipeline<kStages>(k_blocks, copy_weights, copy_slots, [&](int kb) {
    const __nv_bfloat16* ws = smem + (kb % kStages) * StageElems<kSlotTiles>();
    const __nv_bfloat16* xs = ws + kCtaRows * kBlockK;
#pragma unroll
    for (int ks = 0; ks < kBlockK / 16; ++ks) {
      // A (slots): matrices rows 0-7 / 8-15 x k 0-7 / 8-15 of each 16-slot tile.
      uint32_t a[kSlotTiles][4];
#pragma unroll
      for (int t = 0; t < kSlotTiles; ++t)
        kernels::LdMatrixX4(a[t], xs + Swizzled(16 * t + lane % 8 + 8 * (lane / 8 % 2), 2 * ks + lane / 16));
      // B (weights): per 16 rows, matrices (rows 0-7, k 0-7), (0-7, 8-15),
      // (8-15, 0-7), (8-15, 8-15): the fragments of two 8-row mma tiles.
      uint32_t b[2][4];
#pragma unroll
      for (int h = 0; h < 2; ++h)
        kernels::LdMatrixX4(b[h],
                            ws + Swizzled(32 * warp + 16 * h + lane % 8 + 8 * (lane / 16), 2 * ks + lane / 8 % 2));
#pragma unroll
      for (int t = 0; t < kSlotTiles; ++t)
#pragma unroll
        for (int j = 0; j < 4; ++j) kernels::MmaBf16(acc[t][j], a[t], b[j / 2][2 * (j % 2)], b[j / 2][2 * (j % 2) + 1]);
    }
  });

  kernels::StoreGroupedGemmTile<kSlotTiles>(acc, p.n, slot0, kTileRows, n0 + 32 * warp, p.epilogue, p.y);
}

template <int kTileRows>
cudaError_t LaunchTileRows(const GroupedExpertGemvParams& p, cudaStream_t stream) {
  constexpr size_t kBytes = SharedBytes<kernels::kGroupedGemmSlotTiles<kTileRows>>();
  // Over the 48 KB default: opt in once per process (one kind of device).
  static const cudaError_t opt_in = cudaFuncSetAttribute(
      GroupedExpertGemmKernel<kTileRows>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kBytes));
  if (opt_in != cudaSuccess) return opt_in;
  const dim3 grid(static_cast<unsigned>((int64_t{p.n} + kCtaRows - 1) / kCtaRows), static_cast<unsigned>(p.max_tiles));
  if (p.dependent)
    return kernels::LaunchDependent(GroupedExpertGemmKernel<kTileRows>, grid, dim3(kThreads), kBytes, stream, p);
  GroupedExpertGemmKernel<kTileRows><<<grid, kThreads, kBytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchGroupedExpertGemm(const GroupedExpertGemvParams& p, cudaStream_t stream) {
  if (!GroupedExpertParamsValid(p)) return cudaErrorInvalidValue;
  switch (p.tile_rows) {
    case 8:
      return LaunchTileRows<8>(p, stream);
    case 16:
      return LaunchTileRows<16>(p, stream);
    case 32:
      return LaunchTileRows<32>(p, stream);
    case 64:
      return LaunchTileRows<64>(p, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace ernie::cuda
