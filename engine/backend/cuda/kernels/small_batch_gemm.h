// y = x W^T for decode-sized batches (1 - 64 rows of x) on the tensor cores,
// written for the place cuBLAS is weakest inside a decode graph: there its
// GEMMs of the 0.3b shape take 5 - 7 us a launch at 16 - 256 rows for 5 - 13
// MB of weights (floors 1.2 - 2.9 us), because each starts cold when the
// kernel before it ends (NOTES.md v19 timeline at 64: 23 us a layer of GEMMs
// against 6.6 us of bytes). This kernel is launched as a programmatic
// dependent and requests its whole weight tile into shared memory before it
// waits for the kernel before, so the weights stream while that one
// finishes; only the input rows (bf16, from L2) are read after the wait.
//
// A CTA owns 64 weight rows and one k slice of 128, 256 or 512; the slices of
// a row tile form a thread-block cluster (at most 8) and sum their partial
// tiles through distributed shared memory in rank order, so the result is
// deterministic. Rows of x are mma's 8-wide side ("swap AB", linear_mma.cuh).
//
// Measured (NOTES.md v20, 0.3b greedy step, same run): faster than cuBLAS up
// to 24 rows (0.737 -> 0.571 ms at 4, 0.749 -> 0.682 at 16), slower from 32
// (every CTA re-reads the x rows' slice: at 64 rows as many bytes as its
// weights), which is where the backend's default switch sits.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/backend/cuda/kernels/decode_linear.h"  // DecodeRotaryKv
#include "engine/backend/cuda/kernels/gemv_bf16.h"      // LinearOutput

namespace ernie::cuda {

constexpr int32_t kSmallBatchGemmMaxRows = 64;

// What the CTA that owns an output does with its sum (bias added first):
//   kStore     y[m, n] = sum (float32, += with accumulate, or bf16);
//   kSiluMul   y[m, j] = silu(g) * u for gate row j and up row width + j
//              (n = 2 width, width a multiple of 32: a CTA stages 32 gate
//              rows and the 32 matching up rows), float32 or bf16, so the
//              SiLU kernel after gate|up is not needed;
//   kRotaryKv  the fused q|k|v projection as decode_linear.h's kRotaryKv:
//              rotary on q and k, q to y (float32 [m, n]), k and v into the
//              paged cache (the rotary + KV write kernel is not needed).
enum class SmallBatchEpilogue : int32_t { kStore, kSiluMul, kRotaryKv };

struct SmallBatchGemmParams {
  const __nv_bfloat16* x = nullptr;  // [m, k], rows x_stride elements apart, 16-byte aligned
  const __nv_bfloat16* w = nullptr;  // [n, k] row-major (torch Linear [out, in]), 16-byte aligned
  void* y = nullptr;                 // [m, n] row-major, float or bf16 per `out`
  int32_t m = 0;                     // 1 .. kSmallBatchGemmMaxRows (warpgroup_gemm.h: kWarpgroupGemmMaxRows)
  int32_t n = 0;                     // >= 1
  int32_t k = 0;                     // see SmallBatchGemmSupports
  int32_t x_stride = 0;              // 0: k; else >= k, a multiple of 8
  LinearOutput out = LinearOutput::kF32;
  bool accumulate = false;  // y += x W^T (kStore with float32 output only)
  SmallBatchEpilogue epilogue = SmallBatchEpilogue::kStore;
  const float* bias = nullptr;  // [n] or nullptr
  DecodeRotaryKv rotary;        // kRotaryKv only
};

// Whether a [n, k] weight fits the kernel with `epilogue`: k a multiple of
// 128 and at most 8 slices of 512 (4,096); kSiluMul also n a multiple of 64.
bool SmallBatchGemmSupports(int64_t n, int64_t k, SmallBatchEpilogue epilogue = SmallBatchEpilogue::kStore);

// cudaErrorInvalidValue for a null or misaligned pointer or a size out of
// range (checked before any CUDA call); otherwise the launch's error.
// Allocates nothing; graph-capturable once the first launch (which sets the
// kernels' shared-memory limits) has run outside a capture.
cudaError_t LaunchSmallBatchGemm(const SmallBatchGemmParams& p, cudaStream_t stream);

}  // namespace ernie::cuda
