// AWQ int4 linears: the decode kernel and the prefill dequantiser (see
// awq_gemm.h for the packed layout, linear_mma.cuh for the tile mapping,
// awq_blocks.cuh for the k loop the decode kernel shares with the grouped
// expert kernel).
//
// Decode work split, as in gemv_bf16.cu: a warp owns a 16-row tile and a k
// slice, 8 warps a CTA, slices summed in shared memory.
#include <cuda_fp16.h>

#include "engine/backend/cuda/kernels/awq_blocks.cuh"
#include "engine/backend/cuda/kernels/awq_bulk_loop.cuh"
#include "engine/backend/cuda/kernels/awq_gemm.h"
#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/linear_mma.cuh"

namespace ernie::cuda {

namespace {

using kernels::kAwqBlockK;
using kernels::kLinearWarps;

// Which 16-row tile and k slice a warp of a GEMV CTA owns: k_slices warps
// share a tile along k, kLinearWarps / k_slices tiles a CTA.
struct WarpWork {
  int slice, tiles_per_cta;
  int64_t tile;
};
__device__ __forceinline__ WarpWork WarpWorkOf(const AwqGemvParams& p, int k_slices, int warp) {
  const int tiles_per_cta = kernels::DivBySlices(kLinearWarps, k_slices);
  const int64_t tiles = (int64_t{p.w.n} + 15) / 16;
  // A tile past the last (grid rounding) reads the last one again; ReduceAndStore drops its rows.
  const int64_t tile = min(int64_t{blockIdx.x} * tiles_per_cta + kernels::DivBySlices(warp, k_slices), tiles - 1);
  return {warp & (k_slices - 1), tiles_per_cta, tile};
}

// Two CTAs an SM for one tile of x at group >= 128 (at most 128 registers,
// two chunks in flight): at m <= 8 the loads in flight, not the math, set the pace.
// kStageX: x's m rows are copied to shared memory once the kernel before
// has finished, with their unit sums (awq_blocks.cuh's
// StageAwqXRowsWithSums: the zero points then come off once a group), for
// m <= 8 when they fit.
template <int kTiles, int kScaleHalves, bool kStageX, bool kWholeChunks = false>
__global__ void __launch_bounds__(32 * kLinearWarps, kTiles == 1 && kScaleHalves == 4 ? 2 : 1)
    AwqGemvKernel(AwqGemvParams p, int k_slices, int group_shift) {
  kernels::AllowDependentLaunch();  // launched as a dependent: see LaunchDependent
  __shared__ float red[kLinearWarps * 16 * 8 * kTiles];  // the cross-warp sum
  extern __shared__ uint4 staged_x[];                     // kStageX: [m][k + pad] bf16
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4;
  const WarpWork work = WarpWorkOf(p, k_slices, warp);
  const int slice = work.slice, tiles_per_cta = work.tiles_per_cta;
  const int64_t tile = work.tile;
  const int k = p.w.k, groups2 = kernels::AwqRecordGroups2(k, group_shift);
  auto* xs = reinterpret_cast<__nv_bfloat16*>(staged_x);
  float* x_sums = kStageX ? kernels::AwqStagedXSums(xs, p.m, k) : nullptr;  // the zero points' x sums
  const __nv_bfloat16* x_row[kTiles];  // rows >= m feed zeros
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
    const int row = 8 * t + g;
    x_row[t] = row >= p.m ? nullptr
               : kStageX  ? xs + int64_t{row} * (k + kernels::kAwqStagedRowPad)
                          : p.x + int64_t{row} * k;
  }
  auto stage_x = [&] {
    if constexpr (kStageX) {
      kernels::StageAwqXRowsWithSums<kScaleHalves>(p.m, k, xs, x_sums, [&](int r) { return p.x + int64_t{r} * k; });
      __syncthreads();
    }
  };
  float acc[kTiles][4] = {};
  // Waits for the kernel before (WaitForPrerequisiteGrids) once its first weights are requested.
  kernels::AwqAccumulateSlice<kTiles, kScaleHalves, kStageX, kernels::kAwqChunksInFlight<kTiles>, kWholeChunks>(
      p.w.packed + tile * (k / kAwqBlockK) * 32 * 4, p.w.records + tile * 8 * groups2 * 2, x_row, kStageX ? xs : p.x,
      x_sums, (p.m + 7) / 8, k, group_shift, slice, k_slices, acc, stage_x);
  const int64_t cta_row0 = int64_t{blockIdx.x} * tiles_per_cta * 16;
  kernels::ReduceAndStore<kTiles>(acc, red, k_slices, cta_row0, p.w.n, p.m, p.y, p.out == LinearOutput::kBf16);
}

// The m <= 8 kernel with the weights streamed through shared memory by bulk
// copies (awq_bulk_loop.cuh) and x staged with its unit sums. Dynamic shared
// memory: each warp's ring, then the staged rows and sums.
template <int kScaleHalves>
__global__ void __launch_bounds__(32 * kLinearWarps, 2) AwqGemvBulkKernel(AwqGemvParams p, int k_slices, int group_shift) {
  kernels::AllowDependentLaunch();  // launched as a dependent: see LaunchDependent
  __shared__ float red[kLinearWarps * 16 * 8];  // the cross-warp sum
  __shared__ uint64_t bars[kLinearWarps][kernels::kAwqBulkStages];
  extern __shared__ uint4 dynamic_shared[];
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4;
  const WarpWork work = WarpWorkOf(p, k_slices, warp);
  const int slice = work.slice, tiles_per_cta = work.tiles_per_cta;
  const int64_t tile = work.tile;
  const int k = p.w.k, groups2 = kernels::AwqRecordGroups2(k, group_shift);
  const int ring_bytes = kernels::AwqBulkRingBytes(group_shift);
  auto* rings = reinterpret_cast<unsigned char*>(dynamic_shared);
  auto* xs = reinterpret_cast<__nv_bfloat16*>(rings + kLinearWarps * ring_bytes);
  float* x_sums = kernels::AwqStagedXSums(xs, p.m, k);
  const __nv_bfloat16* x_row[1] = {g < p.m ? xs + int64_t{g} * (k + kernels::kAwqStagedRowPad) : nullptr};
  auto stage_x = [&] {
    kernels::StageAwqXRowsWithSums<kScaleHalves>(p.m, k, xs, x_sums, [&](int r) { return p.x + int64_t{r} * k; });
    __syncthreads();
  };
  float acc[1][4] = {};
  // Waits for the kernel before (WaitForPrerequisiteGrids) once its first weight copies are issued.
  kernels::AwqAccumulateSliceBulk<kScaleHalves, true>(p.w.packed + tile * (k / kAwqBlockK) * 32 * 4,
                                                      p.w.records + tile * 8 * groups2 * 2, x_row, xs, x_sums, k,
                                                      group_shift, slice, k_slices, acc, rings + warp * ring_bytes,
                                                      bars[warp], stage_x);
  const int64_t cta_row0 = int64_t{blockIdx.x} * tiles_per_cta * 16;
  kernels::ReduceAndStore<1>(acc, red, k_slices, cta_row0, p.w.n, p.m, p.y, p.out == LinearOutput::kBf16);
}

// One thread per (tile, 64-k block, lane): the 16 bytes that lane would load
// in the decode kernel, written out as bf16 (q - z) * s at their rows and k.
__global__ void AwqDequantizeKernel(AwqWeightsView w, __nv_bfloat16* out, int group_shift) {
  const int blocks = w.k / kAwqBlockK, groups2 = kernels::AwqRecordGroups2(w.k, group_shift);
  const int64_t tiles = (int64_t{w.n} + 15) / 16;
  const int64_t item = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (item >= tiles * blocks * 32) return;
  const int lane = static_cast<int>(item % 32), g = lane / 4, c = lane % 4;
  const int block = static_cast<int>(item / 32 % blocks);
  const int64_t tile = item / 32 / blocks;
  const uint4 v = __ldg(reinterpret_cast<const uint4*>(w.packed) + item);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int h = j / 2, i = j % 2;
    const int64_t r = tile * 16 + g + 8 * i;
    if (r >= w.n) continue;
    const int kk = block * kAwqBlockK + 32 * h;
    const uint32_t rec = __ldg(w.records + ((tile * 8 + g) * groups2 + (kk >> group_shift)) * 2 + i);
    // The 8 values k = kk + 8c .. +7 of row r, one 16-byte store.
    *reinterpret_cast<uint4*>(out + r * w.k + kk + 8 * c) = kernels::AwqDequantWord(kernels::AwqWordOf(v, j), rec);
  }
}

template <int kTiles, int kScaleHalves, bool kStageX = false, bool kWholeChunks = false>
cudaError_t LaunchGemvTiles(const AwqGemvParams& p, int group_shift, cudaStream_t stream) {
  constexpr auto kKernel = AwqGemvKernel<kTiles, kScaleHalves, kStageX, kWholeChunks>;
  cudaError_t error = cudaSuccess;
  // (Occupancy as without staging: 44 KB of x and 4 KB of sums still fit two CTAs an SM.)
  const int64_t resident = kernels::ResidentCtas<kKernel>(&error);
  if (error != cudaSuccess) return error;
  const kernels::GemvLaunchShape shape =
      kernels::PickGemvLaunchShape((int64_t{p.w.n} + 15) / 16, kernels::AwqChunks(p.w.k), resident, p.k_slices);
  const size_t staged = kStageX ? static_cast<size_t>(kernels::AwqStagedXBytes(p.m, p.w.k, kScaleHalves)) : 0;
  return kernels::LaunchDependent(kKernel, shape.grid, dim3(32 * kLinearWarps), staged, stream, p, shape.k_slices,
                                  group_shift);
}

// Shared memory of the bulk kernel: the warps' rings and the staged rows.
int64_t AwqBulkSharedBytes(int m, int k, int group_shift, int scale_halves) {
  return int64_t{kLinearWarps} * kernels::AwqBulkRingBytes(group_shift) +
         kernels::AwqStagedXBytes(m, k, scale_halves);
}

// The bulk kernel, or cudaErrorNotSupported when its shared memory does not
// fit (the caller then takes the register loop).
template <int kScaleHalves>
cudaError_t LaunchGemvBulk(const AwqGemvParams& p, int group_shift, cudaStream_t stream) {
  constexpr auto kKernel = AwqGemvBulkKernel<kScaleHalves>;
  cudaError_t error = cudaSuccess;
  const int max_bytes = kernels::OptInToMaxDynamicShared<kKernel>(&error);
  if (error != cudaSuccess) return error;
  const int64_t bytes = AwqBulkSharedBytes(p.m, p.w.k, group_shift, kScaleHalves);
  if (bytes > max_bytes) return cudaErrorNotSupported;
  // Resident CTAs for this launch's shared memory (it varies with m and k).
  const int64_t resident = kernels::ResidentCtasWithShared<kKernel>(static_cast<size_t>(bytes), &error);
  if (error != cudaSuccess) return error;
  const kernels::GemvLaunchShape shape =
      kernels::PickGemvLaunchShape((int64_t{p.w.n} + 15) / 16, kernels::AwqChunks(p.w.k), resident, p.k_slices);
  return kernels::LaunchDependent(kKernel, shape.grid, dim3(32 * kLinearWarps), static_cast<size_t>(bytes), stream, p,
                                  shape.k_slices, group_shift);
}

template <int kScaleHalves>
cudaError_t LaunchGemvForGroup(const AwqGemvParams& p, int group_shift, cudaStream_t stream) {
  if (p.m <= 8 && p.loop == AwqGemvLoop::kBulkCopy) {
    const cudaError_t bulk = LaunchGemvBulk<kScaleHalves>(p, group_shift, stream);
    if (bulk != cudaErrorNotSupported) return bulk;
  }
  if (p.m <= 8 && kernels::AwqStagedXBytes(p.m, p.w.k, kScaleHalves) <= kernels::kAwqMaxStagedXBytes)
    return kernels::AwqWholeChunks(p.w.k) ? LaunchGemvTiles<1, kScaleHalves, true, true>(p, group_shift, stream)
                                          : LaunchGemvTiles<1, kScaleHalves, true>(p, group_shift, stream);
  if (p.m <= 8) return LaunchGemvTiles<1, kScaleHalves>(p, group_shift, stream);
  if (p.m <= 16) return LaunchGemvTiles<2, kScaleHalves>(p, group_shift, stream);
  return LaunchGemvTiles<4, kScaleHalves>(p, group_shift, stream);
}

}  // namespace

int CheckedGroupShift(const AwqWeightsView& w) {
  if (w.packed == nullptr || w.records == nullptr || !kernels::Aligned16(w.packed) || !kernels::Aligned16(w.records))
    return -1;
  if (w.n < 8 || w.n % 8 != 0 || w.k < kAwqBlockK || w.k % kAwqBlockK != 0) return -1;
  if (w.group_size < 32 || (w.group_size & (w.group_size - 1)) != 0 || w.k % w.group_size != 0) return -1;
  return __builtin_ctz(static_cast<unsigned>(w.group_size));
}

cudaError_t LaunchAwqGemv(const AwqGemvParams& p, cudaStream_t stream) {
  const int group_shift = CheckedGroupShift(p.w);
  if (group_shift < 0 || p.x == nullptr || p.y == nullptr || !kernels::Aligned16(p.x)) return cudaErrorInvalidValue;
  if (p.m < 1 || p.m > kGemvMaxRows) return cudaErrorInvalidValue;
  if (p.out != LinearOutput::kF32 && p.out != LinearOutput::kBf16) return cudaErrorInvalidValue;
  if (p.k_slices != 0 && p.k_slices != 1 && p.k_slices != 2 && p.k_slices != 4 && p.k_slices != 8)
    return cudaErrorInvalidValue;
  if (kernels::AwqScaleHalves(p.w.group_size) == 4) return LaunchGemvForGroup<4>(p, group_shift, stream);
  return LaunchGemvForGroup<1>(p, group_shift, stream);
}

cudaError_t LaunchAwqDequantize(const AwqDequantizeParams& p, cudaStream_t stream) {
  const int group_shift = CheckedGroupShift(p.w);
  if (group_shift < 0 || p.out == nullptr || !kernels::Aligned16(p.out)) return cudaErrorInvalidValue;
  if (p.out_bytes < AwqDequantWorkspaceBytes(p.w.n, p.w.k)) return cudaErrorInvalidValue;
  const int64_t items = (int64_t{p.w.n} + 15) / 16 * (p.w.k / kAwqBlockK) * 32;
  constexpr int kThreads = 256;
  AwqDequantizeKernel<<<static_cast<unsigned>((items + kThreads - 1) / kThreads), kThreads, 0, stream>>>(p.w, p.out,
                                                                                                         group_shift);
  return cudaGetLastError();
}

}  // namespace ernie::cuda
