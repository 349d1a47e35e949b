// The warpgroup (wgmma) GEMM for decode steps (see warpgroup_gemm.h).
//
// A CTA: one warpgroup (4 warps), 64 weight rows (wgmma's M, the A operand),
// one k slice of 64 - 512, and up to 128 x rows (wgmma's N, the B operand,
// padded with zero rows to N); steps of more rows take a second block of 128
// on grid z (its CTAs read the same weights, mostly from L2). Shared memory,
// 1,024-byte aligned: the weight tile as slice_k / 64 swizzled [64 x 64]
// chunks and the x slice as as many [N x 64] chunks (wgmma.cuh gives the
// layout); once the products are done, the same bytes are the receive area
// of the cluster's split-k sum (cluster_k_reduce.cuh), which is why a CTA
// arrives at the cluster barrier only then. Without the reuse, down_proj's
// k = 3,072 (six slices of 512) did not fit at 65 - 128 rows.
//
// Order of work: the weight chunks are requested before the programmatic
// wait (they never depend on earlier kernels), the x chunks after it, each
// its own cp.async group; chunk q's four k-steps of wgmma are issued as soon
// as its group has landed, so the tensor cores work while later chunks load.
#include <algorithm>

#include "engine/backend/cuda/kernels/cluster_k_reduce.cuh"
#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/linear_mma.cuh"
#include "engine/backend/cuda/kernels/warpgroup_gemm.h"
#include "engine/backend/cuda/kernels/wgmma.cuh"

namespace ernie::cuda {

namespace {

using kernels::kReduceMaxSlices;
using kernels::kReduceTileRows;

constexpr int kThreads = 128;  // one warpgroup
constexpr int kTileRows = kReduceTileRows;
constexpr int kChunkK = 64;                        // bf16 of one 128-byte swizzled row
constexpr int kMaxChunks = 512 / kChunkK;          // the largest slice
constexpr int64_t kAlignSlack = 1024;              // dynamic shared memory is only 16-byte aligned
constexpr int64_t ChunkBytes(int rows) { return int64_t{rows} * kChunkK * 2; }

constexpr int kMaxXRows = 128;                    // x rows of a CTA (wgmma's N)
constexpr int64_t SharedBytes(int slice_k, int slices, int x_rows) {
  const int64_t staged = int64_t{slice_k / kChunkK} * (ChunkBytes(kTileRows) + ChunkBytes(x_rows));
  return kAlignSlack + std::max(staged, kernels::ReceiveBytes(slices, x_rows));
}

// Rows [0, rows) of one k chunk (64 bf16 at src + 64 q) into the swizzled
// chunk tile: row r's 16-byte piece c at piece c ^ (r % 8) of tile row
// first_row + r. Rows at or past `valid_rows` are zero-filled (their source,
// row 0, is not read). Consecutive threads take consecutive pieces of a row.
__device__ __forceinline__ void StageChunk(__nv_bfloat16* tile, int first_row, const __nv_bfloat16* src,
                                           int64_t src_stride, int rows, int valid_rows) {
  for (int i = threadIdx.x; i < rows * 8; i += kThreads) {
    const int r = i >> 3, piece = i & 7, tile_row = first_row + r;
    const bool valid = r < valid_rows;
    kernels::CpAsync16OrZero(tile + tile_row * kChunkK + 8 * (piece ^ (tile_row & 7)),
                             src + (valid ? r : 0) * src_stride + 8 * piece, valid);
  }
}

// cp.async.wait_group takes an immediate: at most `pending` groups in flight.
__device__ __forceinline__ void CpAsyncWaitAtMost(int pending) {
  switch (pending) {
    case 0: kernels::CpAsyncWait<0>(); break;
    case 1: kernels::CpAsyncWait<1>(); break;
    case 2: kernels::CpAsyncWait<2>(); break;
    case 3: kernels::CpAsyncWait<3>(); break;
    case 4: kernels::CpAsyncWait<4>(); break;
    case 5: kernels::CpAsyncWait<5>(); break;
    case 6: kernels::CpAsyncWait<6>(); break;
    default: kernels::CpAsyncWait<7>(); break;
  }
}

template <int kXTiles>
__global__ void __launch_bounds__(kThreads) WarpgroupGemmKernel(SmallBatchGemmParams p, int slice_k, int slices) {
  constexpr int kXRows = 8 * kXTiles;
  extern __shared__ __align__(16) unsigned char smem_raw[];  // aligned to 1,024 below
  unsigned char* smem = smem_raw + ((1024 - (kernels::SharedAddress(smem_raw) & 1023)) & 1023);
  const int chunks = slice_k / kChunkK;
  auto* ws = reinterpret_cast<__nv_bfloat16*>(smem);  // chunks x [64 x 64]
  __nv_bfloat16* xs = ws + chunks * kTileRows * kChunkK;  // chunks x [kXRows x 64]
  auto* receive = reinterpret_cast<float*>(smem);          // once the products are done

  kernels::AllowDependentLaunch();
  const int rank = blockIdx.x;  // the cluster spans gridDim.x: rank = slice
  const int x_row0 = static_cast<int>(blockIdx.z) * kMaxXRows, rows = min(p.m - x_row0, kMaxXRows);
  // kSiluMul: gate rows half_row0 .. + 31 and the matching up rows; else rows row0 .. row0 + 63.
  const bool silu = p.epilogue == SmallBatchEpilogue::kSiluMul;
  const int64_t row0 = int64_t{blockIdx.y} * kTileRows, half_row0 = int64_t{blockIdx.y} * (kTileRows / 2);
  const int k0 = rank * slice_k;
  const int valid_w = silu ? kTileRows : static_cast<int>(std::min<int64_t>(kTileRows, p.n - row0));
  // The weights never depend on the kernels before: requested before the wait.
  for (int q = 0; q < chunks; ++q) {
    __nv_bfloat16* tile = ws + q * kTileRows * kChunkK;
    const int64_t k_at = k0 + q * kChunkK;
    if (silu) {
      constexpr int kHalf = kTileRows / 2;
      StageChunk(tile, 0, p.w + half_row0 * p.k + k_at, p.k, kHalf, kHalf);
      StageChunk(tile, kHalf, p.w + (p.n / 2 + half_row0) * p.k + k_at, p.k, kHalf, kHalf);
    } else {
      StageChunk(tile, 0, p.w + row0 * p.k + k_at, p.k, kTileRows, valid_w);
    }
  }
  kernels::CpAsyncCommit();
  kernels::WaitForPrerequisiteGrids();
  const int x_stride = p.x_stride > 0 ? p.x_stride : p.k;
  for (int q = 0; q < chunks; ++q) {
    StageChunk(xs + q * kXRows * kChunkK, 0, p.x + int64_t{x_row0} * x_stride + k0 + q * kChunkK, x_stride, kXRows,
               rows);
    kernels::CpAsyncCommit();
  }

  float acc[kXTiles][4] = {};
  const uint32_t w_at = kernels::SharedAddress(ws), x_at = kernels::SharedAddress(xs);
  for (int q = 0; q < chunks; ++q) {
    // Chunk q's x group (and every group before it, the weights' too) has
    // landed for this thread; the fence hands its writes to the async proxy
    // wgmma reads through, the barrier makes every thread's visible.
    CpAsyncWaitAtMost(chunks - 1 - q);
    kernels::FenceSharedForAsyncProxy();
    __syncthreads();
    kernels::WgmmaFence();
#pragma unroll
    for (int s = 0; s < kChunkK / 16; ++s) {
      const uint64_t a = kernels::WgmmaDescriptor128B(w_at + static_cast<uint32_t>(ChunkBytes(kTileRows) * q + 32 * s));
      const uint64_t b = kernels::WgmmaDescriptor128B(x_at + static_cast<uint32_t>(ChunkBytes(kXRows) * q + 32 * s));
      kernels::WgmmaBf16<kXTiles>(acc, a, b, true);
    }
    kernels::WgmmaCommit();
  }
  kernels::WgmmaWait<0>();  // the operands' shared memory is free from here

  kernels::ClusterArrive();
  kernels::PushPartials<kXTiles>(acc, receive, rows, slices, rank);
  kernels::SumAndFinish<kThreads>(p, receive, kXRows, slices, rank, row0, half_row0, valid_w, x_row0, rows);
}

using KernelFn = void (*)(SmallBatchGemmParams, int, int);

// wgmma's N for a CTA's rows: the rows of its first block of x, rounded up.
int XTilesFor(int m) { return m <= 16 ? 2 : m <= 32 ? 4 : m <= 64 ? 8 : 16; }

template <int kXTiles>
struct Bucket {
  static constexpr KernelFn kKernel = WarpgroupGemmKernel<kXTiles>;
  // Shared-memory opt-in (once per process): the dynamic bytes a CTA may
  // ask for, 0 with `*error` set on failure.
  static int64_t OptIn(cudaError_t* error) {
    return kernels::OptInToMaxDynamicShared<WarpgroupGemmKernel<kXTiles>>(error);
  }
  static int64_t Resident(int64_t shared_bytes, cudaError_t* error) {
    return kernels::ResidentCtasWithShared<WarpgroupGemmKernel<kXTiles>>(static_cast<size_t>(shared_bytes), error,
                                                                         kThreads / 32);
  }
};

// f(Bucket<x_tiles>{}) for the bucket of x_tiles.
template <typename F>
auto WithBucket(int x_tiles, F f) {
  switch (x_tiles) {
    case 2: return f(Bucket<2>{});
    case 4: return f(Bucket<4>{});
    case 8: return f(Bucket<8>{});
    default: return f(Bucket<16>{});
  }
}

struct SlicePlan {
  int slice_k = 0, slices = 0;
};

// The k slice as the small-batch GEMM picks it, among those whose shared
// memory fits a CTA (`max_shared` bytes): fewest waves of resident CTAs
// first; within one wave, the largest slice (fewest CTAs, least x re-read)
// whose grid covers every SM, else the most CTAs.
SlicePlan PickSlices(int64_t n, int k, int x_tiles, int x_blocks, int64_t max_shared, cudaError_t* error) {
  const int sms = kernels::MultiprocessorCount(error);
  if (sms == 0) return {};
  const int64_t tiles = (n + kTileRows - 1) / kTileRows * x_blocks;  // kSiluMul: n / 64 as well
  SlicePlan best;
  int64_t best_waves = 0, best_ctas = 0;
  for (int slice_k : {512, 256, 128, 64}) {
    if (k % slice_k != 0 || k / slice_k > kReduceMaxSlices) continue;
    const SlicePlan plan{slice_k, k / slice_k};
    const int64_t ctas = tiles * plan.slices;
    const int64_t shared = SharedBytes(slice_k, plan.slices, 8 * x_tiles);
    if (shared > max_shared) continue;
    const int64_t resident = WithBucket(x_tiles, [&](auto bucket) { return bucket.Resident(shared, error); });
    if (*error != cudaSuccess) return {};
    if (resident <= 0) continue;
    const int64_t waves = (ctas + resident - 1) / resident;
    const bool better = best.slices == 0 || waves < best_waves ||
                        (waves == best_waves && best_ctas < sms && ctas > best_ctas);  // larger slices come first
    if (better) best = plan, best_waves = waves, best_ctas = ctas;
  }
  return best;
}

}  // namespace

bool WarpgroupGemmSupports(int64_t n, int64_t k, SmallBatchEpilogue epilogue) {
  return n >= 1 && (n + kTileRows - 1) / kTileRows <= 65535 && k >= kChunkK && k % kChunkK == 0 &&
         k <= int64_t{kMaxChunks} * kChunkK * kReduceMaxSlices &&
         (epilogue != SmallBatchEpilogue::kSiluMul || n % kTileRows == 0);
}

cudaError_t LaunchWarpgroupGemm(const SmallBatchGemmParams& p, cudaStream_t stream) {
  const int x_stride = p.x_stride > 0 ? p.x_stride : p.k;
  if (p.x == nullptr || p.w == nullptr || p.y == nullptr || p.m < 1 || p.m > kWarpgroupGemmMaxRows ||
      !WarpgroupGemmSupports(p.n, p.k, p.epilogue) || x_stride < p.k || x_stride % 8 != 0 ||
      (p.accumulate && (p.out != LinearOutput::kF32 || p.epilogue != SmallBatchEpilogue::kStore)) ||
      !kernels::Aligned16(p.x) || !kernels::Aligned16(p.w))
    return cudaErrorInvalidValue;
  if (p.epilogue == SmallBatchEpilogue::kRotaryKv &&
      (p.out != LinearOutput::kF32 || !RotaryKvParamsValid(p.rotary, p.n)))
    return cudaErrorInvalidValue;
  const int x_tiles = XTilesFor(std::min(p.m, kMaxXRows));
  const int x_blocks = (p.m + kMaxXRows - 1) / kMaxXRows;
  cudaError_t error = cudaSuccess;
  const int64_t max_shared = WithBucket(x_tiles, [&](auto bucket) { return bucket.OptIn(&error); });
  if (error != cudaSuccess) return error;
  const SlicePlan plan = PickSlices(p.n, p.k, x_tiles, x_blocks, max_shared, &error);
  if (error != cudaSuccess) return error;
  if (plan.slices == 0) return cudaErrorInvalidValue;  // no slice whose CTA fits an SM
  cudaLaunchAttribute attrs[2];
  attrs[0].id = cudaLaunchAttributeClusterDimension;
  attrs[0].val.clusterDim.x = static_cast<unsigned>(plan.slices);
  attrs[0].val.clusterDim.y = 1;
  attrs[0].val.clusterDim.z = 1;
  attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[1].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(plan.slices), static_cast<unsigned>((p.n + kTileRows - 1) / kTileRows),
                        static_cast<unsigned>(x_blocks));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = static_cast<size_t>(SharedBytes(plan.slice_k, plan.slices, 8 * x_tiles));
  config.stream = stream;
  config.attrs = attrs;
  config.numAttrs = 2;
  const KernelFn kernel = WithBucket(x_tiles, [](auto bucket) { return decltype(bucket)::kKernel; });
  return cudaLaunchKernelEx(&config, kernel, p, plan.slice_k, plan.slices);
}

}  // namespace ernie::cuda
