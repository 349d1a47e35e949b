// The small-batch tensor-core GEMM (see small_batch_gemm.h).
//
// A CTA: 4 warps, 64 weight rows (16 a warp, mma's A operand), one k slice,
// every x row of the step (mma's B operand, 8 rows a tile). Shared memory
// holds the weight tile and the x slice, each row padded by 16 bytes so the
// 8 row addresses of an ldmatrix fall in 8 different bank groups, and the
// receive area of the cluster's split-k sum (cluster_k_reduce.cuh).
#include <algorithm>

#include "engine/backend/cuda/kernels/cluster_k_reduce.cuh"
#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/linear_mma.cuh"
#include "engine/backend/cuda/kernels/small_batch_gemm.h"

namespace ernie::cuda {

namespace {

using kernels::kReduceMaxSlices;
using kernels::kReduceTileRows;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kTileRows = kReduceTileRows;  // weight rows of a CTA: 16 a warp
static_assert(kTileRows == 16 * kWarps);

constexpr int64_t StagedBytes(int slice_k, int x_rows) { return int64_t{kTileRows + x_rows} * (slice_k + 8) * 2; }
constexpr int64_t SharedBytes(int slice_k, int slices, int x_rows) {
  return StagedBytes(slice_k, x_rows) + kernels::ReceiveBytes(slices, x_rows);
}

// 16-byte pieces of `rows` rows of a k slice into padded shared rows; rows
// at or past `valid_rows` are zero-filled (their source is row 0, not read).
__device__ __forceinline__ void StageRows(__nv_bfloat16* dst, const __nv_bfloat16* src, int64_t src_stride,
                                          int rows, int valid_rows, int slice_k, int pieces_log2) {
  const int pieces = 1 << pieces_log2, stride = slice_k + 8;
  for (int i = threadIdx.x; i < rows << pieces_log2; i += kThreads) {
    const int r = i >> pieces_log2, piece = i & (pieces - 1);
    const bool valid = r < valid_rows;
    kernels::CpAsync16OrZero(dst + r * stride + 8 * piece, src + (valid ? r : 0) * src_stride + 8 * piece, valid);
  }
}

template <int kXTiles>
__global__ void __launch_bounds__(kThreads) SmallBatchGemmKernel(SmallBatchGemmParams p, int slice_k, int slices) {
  static_assert(kXTiles % 2 == 0, "x tiles are read in pairs");
  constexpr int kXRows = 8 * kXTiles;
  extern __shared__ __align__(16) unsigned char smem[];
  auto* ws = reinterpret_cast<__nv_bfloat16*>(smem);
  const int stride = slice_k + 8;
  __nv_bfloat16* xs = ws + kTileRows * stride;
  auto* receive = reinterpret_cast<float*>(xs + kXRows * stride);
  const int pieces_log2 = __ffs(slice_k / 8) - 1;

  kernels::AllowDependentLaunch();
  kernels::ClusterArrive();  // at the start: the receive area is its own
  const int rank = blockIdx.x;  // the cluster spans gridDim.x: rank = slice
  // kSiluMul: gate rows half_row0 .. + 31 and the matching up rows; else rows row0 .. row0 + 63.
  const bool silu = p.epilogue == SmallBatchEpilogue::kSiluMul;
  const int64_t row0 = int64_t{blockIdx.y} * kTileRows, half_row0 = int64_t{blockIdx.y} * (kTileRows / 2);
  const int k0 = rank * slice_k;
  const int valid_w = silu ? kTileRows : static_cast<int>(std::min<int64_t>(kTileRows, p.n - row0));
  // The weights never depend on the kernels before: requested before the wait.
  if (silu) {
    constexpr int kHalf = kTileRows / 2;
    StageRows(ws, p.w + half_row0 * p.k + k0, p.k, kHalf, kHalf, slice_k, pieces_log2);
    StageRows(ws + kHalf * stride, p.w + (p.n / 2 + half_row0) * p.k + k0, p.k, kHalf, kHalf, slice_k, pieces_log2);
  } else {
    StageRows(ws, p.w + row0 * p.k + k0, p.k, kTileRows, valid_w, slice_k, pieces_log2);
  }
  kernels::CpAsyncCommit();
  kernels::WaitForPrerequisiteGrids();
  const int x_stride = p.x_stride > 0 ? p.x_stride : p.k;
  StageRows(xs, p.x + k0, x_stride, kXRows, p.m, slice_k, pieces_log2);
  kernels::CpAsyncCommit();
  kernels::CpAsyncWait<0>();
  __syncthreads();

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // ldmatrix addresses: A (16 weight rows x 16 k) as matrices rows 0-7 / 8-15
  // x k 0-7 / 8-15; B pairs of x tiles as tile t k 0-7, k 8-15, tile t+1 alike.
  const __nv_bfloat16* a_at = ws + (16 * warp + lane % 16) * stride + 8 * (lane / 16);
  const __nv_bfloat16* b_at = xs + (lane % 8 + 8 * (lane / 16)) * stride + 8 * (lane / 8 % 2);
  float acc[kXTiles][4] = {};
  // Fragments of two k-steps in flight: the next step's ldmatrix are issued
  // before this step's mma (the asm is volatile, so issue order is source order).
  uint32_t a0[4], a1[4], b0[kXTiles / 2][4], b1[kXTiles / 2][4];
  auto load = [&](uint32_t* a, uint32_t (*b)[4], int kk) {
    kernels::LdMatrixX4(a, a_at + kk);
#pragma unroll
    for (int t = 0; t < kXTiles / 2; ++t) kernels::LdMatrixX4(b[t], b_at + 16 * t * stride + kk);
  };
  auto multiply = [&](const uint32_t* a, const uint32_t (*b)[4]) {
#pragma unroll
    for (int t = 0; t < kXTiles / 2; ++t) {
      kernels::MmaBf16(acc[2 * t], a, b[t][0], b[t][1]);
      kernels::MmaBf16(acc[2 * t + 1], a, b[t][2], b[t][3]);
    }
  };
  load(a0, b0, 0);
  for (int kk = 0; kk < slice_k; kk += 32) {  // slice_k is a multiple of 128
    load(a1, b1, kk + 16);
    multiply(a0, b0);
    if (kk + 32 < slice_k) load(a0, b0, kk + 32);
    multiply(a1, b1);
  }

  kernels::PushPartials<kXTiles>(acc, receive, p.m, slices, rank);
  kernels::SumAndFinish<kThreads>(p, receive, kXRows, slices, rank, row0, half_row0, valid_w, 0, p.m);
}

using KernelFn = void (*)(SmallBatchGemmParams, int, int);

KernelFn KernelFor(int x_tiles) {
  switch (x_tiles) {
    case 2: return SmallBatchGemmKernel<2>;
    case 4: return SmallBatchGemmKernel<4>;
    default: return SmallBatchGemmKernel<8>;
  }
}

int XTilesFor(int m) { return m <= 16 ? 2 : m <= 32 ? 4 : 8; }

// Shared-memory opt-in for one instantiation (once per process): the
// dynamic bytes a CTA may ask for, 0 with `*error` set on failure.
template <int kXTiles>
int64_t OptIn(cudaError_t* error) {
  return kernels::OptInToMaxDynamicShared<SmallBatchGemmKernel<kXTiles>>(error);
}

template <int kXTiles>
int64_t Resident(int64_t shared_bytes, cudaError_t* error) {
  return kernels::ResidentCtasWithShared<SmallBatchGemmKernel<kXTiles>>(static_cast<size_t>(shared_bytes), error,
                                                                         kWarps);
}

int64_t ResidentFor(int x_tiles, int64_t shared_bytes, cudaError_t* error) {
  switch (x_tiles) {
    case 2: return Resident<2>(shared_bytes, error);
    case 4: return Resident<4>(shared_bytes, error);
    default: return Resident<8>(shared_bytes, error);
  }
}

struct SlicePlan {
  int slice_k = 0, slices = 0;
};

// The k slice, among those whose shared memory fits a CTA (`max_shared`
// bytes): fewest waves of resident CTAs first; within one wave, the largest
// slice (fewest CTAs, least x re-read) whose grid covers every SM, else the
// most CTAs.
SlicePlan PickSlices(int64_t n, int k, int x_tiles, int64_t max_shared, cudaError_t* error) {
  const int sms = kernels::MultiprocessorCount(error);
  if (sms == 0) return {};
  const int64_t tiles = (n + kTileRows - 1) / kTileRows;  // kSiluMul: n / 64 as well
  SlicePlan best;
  int64_t best_waves = 0, best_ctas = 0;
  for (int slice_k : {512, 256, 128}) {
    if (k % slice_k != 0 || k / slice_k > kReduceMaxSlices) continue;
    const SlicePlan plan{slice_k, k / slice_k};
    const int64_t ctas = tiles * plan.slices;
    const int64_t shared = SharedBytes(slice_k, plan.slices, 8 * x_tiles);
    if (shared > max_shared) continue;
    const int64_t resident = ResidentFor(x_tiles, shared, error);
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

bool SmallBatchGemmSupports(int64_t n, int64_t k, SmallBatchEpilogue epilogue) {
  return n >= 1 && (n + kTileRows - 1) / kTileRows <= 65535 && k >= 128 && k % 128 == 0 &&
         k <= 512 * kReduceMaxSlices &&
         (epilogue != SmallBatchEpilogue::kSiluMul || n % kTileRows == 0);
}

cudaError_t LaunchSmallBatchGemm(const SmallBatchGemmParams& p, cudaStream_t stream) {
  const int x_stride = p.x_stride > 0 ? p.x_stride : p.k;
  if (p.x == nullptr || p.w == nullptr || p.y == nullptr || p.m < 1 || p.m > kSmallBatchGemmMaxRows ||
      !SmallBatchGemmSupports(p.n, p.k, p.epilogue) || x_stride < p.k || x_stride % 8 != 0 ||
      (p.accumulate && (p.out != LinearOutput::kF32 || p.epilogue != SmallBatchEpilogue::kStore)) ||
      !kernels::Aligned16(p.x) || !kernels::Aligned16(p.w))
    return cudaErrorInvalidValue;
  if (p.epilogue == SmallBatchEpilogue::kRotaryKv &&
      (p.out != LinearOutput::kF32 || !RotaryKvParamsValid(p.rotary, p.n)))
    return cudaErrorInvalidValue;
  const int x_tiles = XTilesFor(p.m);
  cudaError_t error = cudaSuccess;
  const int64_t max_shared = x_tiles == 2 ? OptIn<2>(&error) : x_tiles == 4 ? OptIn<4>(&error) : OptIn<8>(&error);
  if (error != cudaSuccess) return error;
  const SlicePlan plan = PickSlices(p.n, p.k, x_tiles, max_shared, &error);
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
  config.gridDim = dim3(static_cast<unsigned>(plan.slices), static_cast<unsigned>((p.n + kTileRows - 1) / kTileRows));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = static_cast<size_t>(SharedBytes(plan.slice_k, plan.slices, 8 * x_tiles));
  config.stream = stream;
  config.attrs = attrs;
  config.numAttrs = 2;
  return cudaLaunchKernelEx(&config, KernelFor(x_tiles), p, plan.slice_k, plan.slices);
}

}  // namespace ernie::cuda
