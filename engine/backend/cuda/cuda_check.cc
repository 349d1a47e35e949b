#include "engine/backend/cuda/cuda_check.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace ernie::cuda {

absl::Status CudaStatus(cudaError_t error, std::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message = absl::StrCat("CUDA: ", absl::string_view(what.data(), what.size()), " failed: ",
                                           cudaGetErrorName(error), " (", cudaGetErrorString(error), ")");
  switch (error) {
    case cudaErrorMemoryAllocation:
      return absl::ResourceExhaustedError(message);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status CublasStatus(cublasStatus_t status, std::string_view what) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string message = absl::StrCat("cuBLAS: ", absl::string_view(what.data(), what.size()), " failed: ",
                                           cublasGetStatusName(status), " (", cublasGetStatusString(status), ")");
  if (status == CUBLAS_STATUS_ALLOC_FAILED) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

}  // namespace ernie::cuda
