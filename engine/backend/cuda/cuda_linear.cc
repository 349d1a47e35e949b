// The layers' linears of steps too large for the decode kernels (more than
// kDecodeLinearMaxRows tokens), bf16 or AWQ int4, behind one call. AWQ
// linears are dequantised to bf16 (into a workspace the size of the largest
// one) and run through cuBLAS; at these sizes the GEMM is compute-bound, so
// the extra pass over the 4-bit weights is small beside it.
#include "engine/backend/cuda/cuda_backend_impl.h"
#include "engine/backend/cuda/kernels/decode_linear.h"
#include "engine/util/status_macros.h"

namespace ernie::cuda {

absl::Status CudaBackendImpl::RunLinear(const uint16_t* x, int64_t m, int64_t k, const DeviceBuffer<uint16_t>& bf16,
                                        const DeviceAwqLinear& awq, int64_t n, float* y) {
  if (awq.empty()) return gemm_.Run(x, m, k, bf16.data(), n, y, GemmOutput::kF32);
  ERNIE_CUDA_RETURN_IF_ERROR(LaunchInt4RowsDequantize(awq.rows.data(), awq.scale_pairs(), awq.n, awq.k, awq.group_size,
                                                      reinterpret_cast<__nv_bfloat16*>(ws_.awq_weights.data()),
                                                      stream_.get()),
                             "AWQ dequantise kernel");
  return gemm_.Run(x, m, k, ws_.awq_weights.data(), n, y, GemmOutput::kF32);
}

}  // namespace ernie::cuda
