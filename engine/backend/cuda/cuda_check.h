// CUDA and cuBLAS results as absl::Status. Every runtime call, every kernel
// launch (through cudaGetLastError) and every cuBLAS call of the backend goes
// through these, so a device failure is a clear error, never an exit().
#pragma once

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include <string_view>

#include "absl/status/status.h"

namespace ernie::cuda {

// OK for cudaSuccess; ResourceExhausted for an out-of-memory error;
// FailedPrecondition when there is no device or driver; Internal otherwise.
// The message names `what` and CUDA's own error name and text.
absl::Status CudaStatus(cudaError_t error, std::string_view what);

// Same for cuBLAS (CUBLAS_STATUS_ALLOC_FAILED is ResourceExhausted).
absl::Status CublasStatus(cublasStatus_t status, std::string_view what);

// The error of the last kernel launch, if any (cudaGetLastError).
inline absl::Status LaunchStatus(std::string_view kernel) { return CudaStatus(cudaGetLastError(), kernel); }

}  // namespace ernie::cuda

// Returns from the enclosing function when a CUDA runtime call fails.
#define ERNIE_CUDA_RETURN_IF_ERROR(call, what) ERNIE_RETURN_IF_ERROR(::ernie::cuda::CudaStatus((call), (what)))
#define ERNIE_CUBLAS_RETURN_IF_ERROR(call, what) ERNIE_RETURN_IF_ERROR(::ernie::cuda::CublasStatus((call), (what)))
