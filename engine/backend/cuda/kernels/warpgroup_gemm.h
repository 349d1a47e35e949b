// y = x W^T for decode steps of 2 - 256 rows of x on Hopper's warpgroup
// tensor-core instructions (wgmma), written for where neither cuBLAS nor the
// small-batch GEMM (small_batch_gemm.h) is good: at 32 - 64 rows cuBLAS's
// four GEMMs a layer of the 0.3b take ~23 us against 6.6 us of weight bytes
// (each nvjet kernel starts cold when the kernel before ends), and the
// small-batch GEMM, which overlaps its weight reads with that kernel, is
// instruction-bound there: its mma.sync loop, ldmatrix and staging cost more
// instructions a weight byte the more x rows it carries (NOTES.md v20).
//
// Same contract and launch shape as the small-batch GEMM (it takes the same
// SmallBatchGemmParams and epilogues): a programmatic dependent whose CTAs
// request their weight tile before they wait for the kernel before; a CTA
// owns 64 weight rows and one k slice; the slices of a row tile form a
// cluster summing in rank order (cluster_k_reduce.cuh, deterministic). What
// differs: one warpgroup a CTA issues m64nNk16 wgmma with N = the x rows
// rounded up to 16 / 32 / 64 / 128 (more rows: blocks of 128 on grid z),
// both operands read by the tensor cores straight from 128-byte-swizzled
// shared memory (no ldmatrix), and the x slice is staged per 64 k so the
// first products start while the rest lands.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/backend/cuda/kernels/small_batch_gemm.h"

namespace ernie::cuda {

constexpr int32_t kWarpgroupGemmMaxRows = 256;

// Whether a [n, k] weight fits the kernel with `epilogue`: k a multiple of
// 64 and at most 8 slices of 512 (4,096); kSiluMul also n a multiple of 64.
bool WarpgroupGemmSupports(int64_t n, int64_t k, SmallBatchEpilogue epilogue = SmallBatchEpilogue::kStore);

// p.m in 1 .. kWarpgroupGemmMaxRows; otherwise as LaunchSmallBatchGemm:
// cudaErrorInvalidValue for a null or misaligned pointer or a size out of
// range (checked before any CUDA call), else the launch's error. Allocates
// nothing; graph-capturable once the first launch of each row bucket (which
// sets the kernel's shared-memory limit) has run outside a capture.
cudaError_t LaunchWarpgroupGemm(const SmallBatchGemmParams& p, cudaStream_t stream);

}  // namespace ernie::cuda
