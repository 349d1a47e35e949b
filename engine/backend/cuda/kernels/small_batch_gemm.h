// y = x W^T for decode-sized steps (1 - 256 rows of x) on Hopper's warpgroup
// tensor-core instructions (wgmma), written for the place cuBLAS is weakest
// inside a decode graph: there its GEMMs of the 0.3b shape take 5 - 7 us a
// launch at 16 - 64 rows for 5 - 13 MB of weights (floors 1.2 - 2.9 us),
// because each starts cold when the kernel before it ends (NOTES.md v19
// timeline at 64: 23 us a layer of GEMMs against 6.6 us of bytes). This
// kernel is launched as a programmatic dependent and has the TMA load its
// whole weight tile into shared memory before it waits for the kernel
// before, so the weights stream while that one finishes; only the input rows
// (bf16, from L2) are read after the wait.
//
// A CTA owns 64 weight rows (wgmma's M), one k slice of 64 - 512 and up to
// 128 x rows (wgmma's N: the rows rounded up to 16 / 32 / 64 / 128; more rows
// take further blocks of 128 on grid z); the slices of a row tile form a
// thread-block cluster (at most 8) and sum their partial tiles through
// distributed shared memory in rank order, so the result is deterministic.
//
// History (NOTES.md v20, v21): the first version ran mma.sync on cp.async
// staging (4 warps, x rows as the 8-wide side) and beat cuBLAS only up to 24
// rows; this one, same run, 0.3b greedy step: 0.535 -> 0.503 ms at 2 rows,
// 0.625 -> 0.530 at 16, cuBLAS's 0.771 -> 0.590 at 32 and 0.843 -> 0.797 at
// 64; slower than cuBLAS from 128 rows (every CTA re-reads the x rows), which
// is where the backend's default switch sits.
//
// AWQ int4 weights (SmallBatchGemmParams::awq): the same kernel, but instead
// of the TMA's bf16 tile each warp reads one 16-row tile of the repacked
// nibbles (awq_gemm.h's layout, 16 bytes a lane a 64-k block, a quarter of
// the bf16 bytes) and its records, and writes the tile as bf16 (q - z) * s
// into the same swizzled shared-memory layout, before the programmatic wait
// like the TMA's loads. Everything after (x, wgmma, the cluster's split-k
// sum, the epilogues) is shared. Why: AWQ steps of 17 - 64 rows dequantised
// every weight into a bf16 workspace and ran cuBLAS on it, 1.003 ms a 0.3b
// step at 64 rows against bf16's 0.743 (NOTES.md v27).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/backend/cuda/kernels/awq_gemm.h"       // AwqWeightsView
#include "engine/backend/cuda/kernels/decode_linear.h"  // DecodeRotaryKv
#include "engine/backend/cuda/kernels/gemv_bf16.h"      // LinearOutput

namespace ernie::cuda {

constexpr int32_t kSmallBatchGemmMaxRows = 256;

// What the CTA that owns an output does with its sum (bias added first):
//   kStore     y[m, n] = sum (float32, += with accumulate, or bf16);
//   kSiluMul   y[m, j] = silu(g) * u for gate row j and up row width + j
//              (n = 2 width, width a multiple of 32: a CTA loads 32 gate
//              rows and the 32 matching up rows), float32 or bf16, so the
//              SiLU kernel after gate|up is not needed;
//   kRotaryKv  the fused q|k|v projection as decode_linear.h's kRotaryKv:
//              rotary on q and k, q to y (float32 [m, n]), k and v into the
//              paged cache (the rotary + KV write kernel is not needed);
//   kAddResidualNorm  y (float32 [m, n]: the residual stream) += sum, then
//              `norm_out` gets what the next linear's input norm needs
//              (SmallBatchNormOut), so the residual add + RMSNorm kernel
//              after o_proj and down_proj is not needed.
enum class SmallBatchEpilogue : int32_t { kStore, kSiluMul, kRotaryKv, kAddResidualNorm };

// An RMSNorm split over two launches, so that no kernel of its own sits
// between them: RMSNorm(x) W^T = r (x * g) W^T, with r = 1 / sqrt(mean(x^2) +
// eps) per row and g the norm's weight. The launch that updates x
// (kAddResidualNorm) writes x * g in bf16 and each CTA's share of sum(x^2);
// the next launch multiplies x * g by W and each output of row m by r before
// its bias (SmallBatchRowNorm). The rounding is the same as RMSNorm's
// (one to bf16, of x * g where RMSNorm rounds x * g * r).
//
// Partial sums: CTA t of the updating launch (weight rows 64 t .. 64 t + 63,
// kRowNormPartWidth) writes sumsq[t * kRowNormSumsqStride + m] for each x row
// m; a row of width n has n / 64 of them.
constexpr int32_t kRowNormPartWidth = 64;
constexpr int32_t kRowNormSumsqStride = kSmallBatchGemmMaxRows;
// The floats SmallBatchNormOut::sumsq holds for rows of width n.
constexpr int64_t RowNormSumsqFloats(int64_t n) { return n / kRowNormPartWidth * kRowNormSumsqStride; }

struct SmallBatchNormOut {
  const float* weight = nullptr;    // [n] the next norm's g
  __nv_bfloat16* out = nullptr;     // [m, n] bf16(x * g), 16-byte aligned
  float* sumsq = nullptr;           // RowNormSumsqFloats(n)
};

struct SmallBatchRowNorm {
  const float* sumsq = nullptr;  // as SmallBatchNormOut::sumsq; nullptr: x is used as it is
  int32_t width = 0;             // the normalised rows' length (the updating launch's n, a multiple of 64)
  float eps = 1e-5f;
};

struct SmallBatchGemmParams {
  const __nv_bfloat16* x = nullptr;  // [m, k], rows x_stride elements apart, 16-byte aligned
  const __nv_bfloat16* w = nullptr;  // [n, k] row-major (torch Linear [out, in]), 16-byte aligned
  AwqWeightsView awq;                // or int4 weights (awq.packed set, w null): awq.n = n, awq.k = k
  void* y = nullptr;                 // [m, n] row-major, float or bf16 per `out`
  int32_t m = 0;                     // 1 .. kSmallBatchGemmMaxRows
  int32_t n = 0;                     // >= 1
  int32_t k = 0;                     // see SmallBatchGemmSupports
  int32_t x_stride = 0;              // 0: k; else >= k, a multiple of 8
  LinearOutput out = LinearOutput::kF32;
  bool accumulate = false;  // y += x W^T (kStore with float32 output only)
  SmallBatchEpilogue epilogue = SmallBatchEpilogue::kStore;
  const float* bias = nullptr;  // [n] or nullptr
  DecodeRotaryKv rotary;        // kRotaryKv only
  SmallBatchNormOut norm_out;   // kAddResidualNorm only
  SmallBatchRowNorm row_norm;   // any epilogue: x is x * g of an RMSNorm whose r is applied here
};

// Whether a [n, k] weight fits the kernel with `epilogue`: k cut into at
// most 8 slices of 64, 128, 256 or 512 (so at most 4,096, and e.g. not
// 576); kSiluMul and kAddResidualNorm also n a multiple of 64.
bool SmallBatchGemmSupports(int64_t n, int64_t k, SmallBatchEpilogue epilogue = SmallBatchEpilogue::kStore);

// cudaErrorInvalidValue for a null or misaligned pointer or a size out of
// range (checked before any CUDA call); otherwise the launch's error.
// Allocates nothing (the TMA descriptors are encoded on the host and passed
// by value); graph-capturable once the first launch of each row bucket
// (which sets its shared-memory limit) has run outside a capture.
cudaError_t LaunchSmallBatchGemm(const SmallBatchGemmParams& p, cudaStream_t stream);

}  // namespace ernie::cuda
