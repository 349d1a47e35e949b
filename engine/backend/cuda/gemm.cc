#include "engine/backend/cuda/gemm.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ernie::cuda {

namespace {
constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // cuBLAS recommends 32 MiB on Hopper
}

absl::StatusOr<Gemm> Gemm::Create(cudaStream_t stream) {
  Gemm g;
  ERNIE_CUBLAS_RETURN_IF_ERROR(cublasCreate(&g.handle_), "cublasCreate");
  ERNIE_CUBLAS_RETURN_IF_ERROR(cublasSetStream(g.handle_, stream), "cublasSetStream");
  ERNIE_ASSIGN_OR_RETURN(g.workspace_, DeviceBuffer<uint8_t>::Allocate(kWorkspaceBytes, "cuBLAS workspace"));
  ERNIE_CUBLAS_RETURN_IF_ERROR(cublasSetWorkspace(g.handle_, g.workspace_.data(), g.workspace_.bytes()),
                               "cublasSetWorkspace");
  // Default math with CUBLAS_COMPUTE_32F below: bf16 operands on the tensor
  // cores, float32 accumulation (no reduced-precision reductions).
  ERNIE_CUBLAS_RETURN_IF_ERROR(cublasSetMathMode(g.handle_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  return g;
}

Gemm::Gemm(Gemm&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), workspace_(std::move(other.workspace_)) {}

Gemm::~Gemm() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

absl::Status Gemm::Run(const uint16_t* x, int64_t m, int64_t k, const uint16_t* w, int64_t n, void* y,
                       GemmOutput out) const {
  return RunWith(x, k, m, k, w, n, y, out, /*beta=*/0.0f);
}

absl::Status Gemm::RunAccumulate(const uint16_t* x, int64_t x_stride, int64_t m, int64_t k, const uint16_t* w,
                                 int64_t n, float* y) const {
  return RunWith(x, x_stride, m, k, w, n, y, GemmOutput::kF32, /*beta=*/1.0f);
}

absl::Status Gemm::RunWith(const uint16_t* x, int64_t x_stride, int64_t m, int64_t k, const uint16_t* w, int64_t n,
                           void* y, GemmOutput out, float beta) const {
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (m <= 0 || n <= 0 || k <= 0 || m > kMax || n > kMax || k > kMax || x_stride < k || x_stride > kMax)
    return absl::InvalidArgumentError(absl::StrCat("GEMM of shape m=", m, " n=", n, " k=", k, " (x stride ", x_stride,
                                                   ") is not supported"));
  const float alpha = 1.0f;
  // Column-major view: y^T [n, m] = W [n, k] (stored as col-major [k, n], so
  // transposed) times x^T [k, m] (col-major with ld k).
  return CublasStatus(
      cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
                   &alpha, w, CUDA_R_16BF, static_cast<int>(k), x, CUDA_R_16BF, static_cast<int>(x_stride), &beta, y,
                   out == GemmOutput::kF32 ? CUDA_R_32F : CUDA_R_16BF, static_cast<int>(n), CUBLAS_COMPUTE_32F,
                   CUBLAS_GEMM_DEFAULT),
      absl::StrCat("cublasGemmEx m=", m, " n=", n, " k=", k));
}

}  // namespace ernie::cuda
