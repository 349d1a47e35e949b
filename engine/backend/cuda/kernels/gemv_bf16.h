// Small-M linear layer on bf16 weights (decode): y = x W^T for 1 <= m <= 32
// rows of x, reading each weight once with 16-byte streaming loads and doing
// the math on the tensor cores (mma.m16n8k16, float32 accumulation) with the
// rows of x as the 8-wide side of the tile. Each CTA owns whole output rows
// (no split-K workspace, no atomics: the result is deterministic). cuBLAS
// (gemm.h) is the path for larger m; the caller picks by m
// (tools/bench/cuda/gemv_bench.cc measures where).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ernie::cuda {

enum class LinearOutput : int32_t { kF32, kBf16 };

constexpr int32_t kGemvMaxRows = 32;  // m beyond this is cuBLAS's

struct GemvBf16Params {
  const __nv_bfloat16* x = nullptr;  // [m, k] row-major, 16-byte aligned
  const __nv_bfloat16* w = nullptr;  // [n, k] row-major (torch Linear [out, in]), 16-byte aligned
  void* y = nullptr;                 // [m, n] row-major, float or bf16 per `out`
  int32_t m = 0;                     // 1 .. kGemvMaxRows
  int32_t n = 0;                     // >= 1
  int32_t k = 0;                     // >= 8, a multiple of 8 (16-byte rows)
  LinearOutput out = LinearOutput::kF32;
  int32_t k_slices = 0;  // warps sharing a 16-row tile along k: 0 picks (linear_mma.cuh); 1, 2, 4, 8 force (benchmarks)
};

// cudaErrorInvalidValue for a null or misaligned pointer or a size out of
// range; otherwise the launch's error. Allocates nothing; graph-capturable.
cudaError_t LaunchGemvBf16(const GemvBf16Params& p, cudaStream_t stream);

}  // namespace ernie::cuda
