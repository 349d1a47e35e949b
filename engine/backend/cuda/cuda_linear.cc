// The layers' linears, bf16 or AWQ int4, behind one call. For AWQ the switch
// between the int4 GEMV and the rest is where ernie-bench-gemv measured it
// on the H200 (tools/bench/results/gemv-2026-12-02): the GEMV wins at every
// m <= 16 on every shape, and loses at 32. Above it, dequantise + cuBLAS,
// or, up to awq_tiled_gemm_max_rows (off by default: ~2x slower on the 0.3b,
// NOTES.md v27), the tiled int4 GEMM. bf16 linears of
// decode-sized steps take the small-batch GEMM (small_batch_gemm.h), which
// overlaps its weight reads with the kernel before; cuBLAS the rest. AWQ
// linears of awq_small_batch_gemm_min_rows - _max_rows (16 - 64 on dense
// models by default) take the same GEMM on their int4 weights.
#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/cuda_backend_impl.h"
#include "engine/backend/cuda/kernels/awq_gemm.h"
#include "engine/backend/cuda/kernels/grouped_awq_gemm.h"
#include "engine/backend/cuda/kernels/small_batch_gemm.h"
#include "engine/util/status_macros.h"

namespace ernie::cuda {

namespace {
constexpr int64_t kAwqGemvMaxRows = 16;
bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
}

absl::Status CudaBackendImpl::RunLinear(const uint16_t* x, int64_t m, int64_t k, const DeviceBuffer<uint16_t>& bf16,
                                        const DeviceAwqLinear& awq, int64_t n, void* y, GemmOutput out) {
  return RunLinearWithEpilogue(x, m, k, bf16, awq, n, y, out, {}).status();
}

absl::StatusOr<bool> CudaBackendImpl::RunLinearWithEpilogue(const uint16_t* x, int64_t m, int64_t k,
                                                            const DeviceBuffer<uint16_t>& bf16,
                                                            const DeviceAwqLinear& awq, int64_t n, void* y,
                                                            GemmOutput out, const LinearEpilogue& epilogue) {
  const LinearOutput linear_out = out == GemmOutput::kBf16 ? LinearOutput::kBf16 : LinearOutput::kF32;
  const bool supported = SmallBatchGemmSupports(n, k, epilogue.kind) && Aligned16(x);
  const bool small_batch =
      supported && (awq.empty() ? m <= small_batch_gemm_max_rows_ && Aligned16(bf16.data())
                                : m >= awq_small_batch_min_rows_ && m <= awq_small_batch_max_rows_);
  // A split norm has no fallback here: its other half is in the linear before or after.
  if (!small_batch && (epilogue.kind == SmallBatchEpilogue::kAddResidualNorm || epilogue.row_norm.sumsq != nullptr))
    return absl::InternalError(absl::StrCat("a split RMSNorm needs the small-batch GEMM, which a [", n, ", ", k,
                                            "] linear at ", m, " rows does not take"));
  if (small_batch) {
    ERNIE_CUDA_RETURN_IF_ERROR(
        LaunchSmallBatchGemm({.x = reinterpret_cast<const __nv_bfloat16*>(x),
                              .w = awq.empty() ? reinterpret_cast<const __nv_bfloat16*>(bf16.data()) : nullptr,
                              .awq = awq.empty() ? AwqWeightsView{} : awq.view(),
                              .y = epilogue.kind == SmallBatchEpilogue::kSiluMul ? epilogue.y : y,
                              .m = static_cast<int32_t>(m),
                              .n = static_cast<int32_t>(n),
                              .k = static_cast<int32_t>(k),
                              .out = linear_out,
                              .epilogue = epilogue.kind,
                              .bias = epilogue.bias,
                              .rotary = epilogue.rotary,
                              .norm_out = epilogue.norm_out,
                              .row_norm = epilogue.row_norm},
                             stream_.get()),
        "small-batch GEMM kernel");
    return true;
  }
  if (awq.empty()) {
    ERNIE_RETURN_IF_ERROR(gemm_.Run(x, m, k, bf16.data(), n, y, out));
    return false;
  }
  // Both int4 kernels take the same linear; they differ in how they tile m.
  const AwqGemvParams int4{.x = reinterpret_cast<const __nv_bfloat16*>(x),
                           .w = awq.view(),
                           .y = y,
                           .m = static_cast<int32_t>(m),
                           .out = linear_out};
  if (m <= kAwqGemvMaxRows) {
    ERNIE_CUDA_RETURN_IF_ERROR(LaunchAwqGemv(int4, stream_.get()), "AWQ int4 GEMV kernel");
    return false;
  }
  if (m <= awq_tiled_gemm_max_rows_) {
    ERNIE_CUDA_RETURN_IF_ERROR(LaunchAwqTiledGemm(int4, awq_tiled_gemm_tile_rows_, stream_.get()),
                               "AWQ int4 tiled GEMM kernel");
    return false;
  }
  ERNIE_CUDA_RETURN_IF_ERROR(LaunchAwqDequantize({.w = awq.view(),
                                                  .out = reinterpret_cast<__nv_bfloat16*>(ws_.awq_weights.data()),
                                                  .out_bytes = ws_.awq_weights.bytes()},
                                                 stream_.get()),
                             "AWQ dequantise kernel");
  ERNIE_RETURN_IF_ERROR(gemm_.Run(x, m, k, ws_.awq_weights.data(), n, y, out));
  return false;
}

}  // namespace ernie::cuda
