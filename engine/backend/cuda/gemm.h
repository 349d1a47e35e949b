// y = x W^T on cuBLAS: x bf16 [m, k] row-major, W bf16 [n, k] (nn.Linear's
// layout), y [m, n] row-major in float32 or bf16, float32 accumulation on the
// tensor cores. The handle gets a workspace owned here, allocated at start,
// so no GEMM allocates during Forward.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "engine/backend/cuda/device_buffer.h"

namespace ernie::cuda {

enum class GemmOutput { kF32, kBf16 };

class Gemm {
 public:
  // Creates a cuBLAS handle bound to `stream`.
  static absl::StatusOr<Gemm> Create(cudaStream_t stream);
  Gemm(Gemm&& other) noexcept;
  Gemm& operator=(Gemm&&) = delete;
  Gemm(const Gemm&) = delete;
  ~Gemm();

  // x: bf16 [m, k] with row stride k; w: bf16 [n, k]; y: [m, n] row-major.
  absl::Status Run(const uint16_t* x, int64_t m, int64_t k, const uint16_t* w, int64_t n, void* y,
                   GemmOutput out) const;
  // y [m, n] float32 += x W^T, with x's rows `x_stride` elements apart (a
  // column block of a wider matrix).
  absl::Status RunAccumulate(const uint16_t* x, int64_t x_stride, int64_t m, int64_t k, const uint16_t* w, int64_t n,
                             float* y) const;

 private:
  Gemm() = default;
  absl::Status RunWith(const uint16_t* x, int64_t x_stride, int64_t m, int64_t k, const uint16_t* w, int64_t n,
                       void* y, GemmOutput out, float beta) const;
  cublasHandle_t handle_ = nullptr;
  DeviceBuffer<uint8_t> workspace_;  // cuBLAS scratch, fixed size
};

}  // namespace ernie::cuda
