// Owning handles for device memory (cudaMalloc, never managed memory) and
// page-locked host memory (cudaMallocHost, for the per-step staging of
// inputs). Move-only; freed in the destructor. Allocation happens only at
// backend start: Forward never allocates.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/util/status_macros.h"

namespace ernie::cuda {

template <typename T, bool kPinnedHost>
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& other) noexcept : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  Buffer& operator=(Buffer&& other) noexcept {
    if (this != &other) {
      Release();
      data_ = std::exchange(other.data_, nullptr);
      count_ = std::exchange(other.count_, 0);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { Release(); }

  // `count` elements; `what` names the buffer in an out-of-memory error.
  static absl::StatusOr<Buffer> Allocate(size_t count, std::string_view what) {
    Buffer b;
    if (count == 0) return b;
    void* p = nullptr;
    const size_t bytes = count * sizeof(T);
    const cudaError_t e = kPinnedHost ? cudaMallocHost(&p, bytes) : cudaMalloc(&p, bytes);
    if (e != cudaSuccess) (void)cudaGetLastError();  // not sticky: clear it, or the next launch check reports it
    ERNIE_RETURN_IF_ERROR(CudaStatus(e, absl::StrCat(kPinnedHost ? "cudaMallocHost" : "cudaMalloc", " of ", bytes,
                                                     " bytes for ", absl::string_view(what.data(), what.size()))));
    b.data_ = static_cast<T*>(p);
    b.count_ = count;
    return b;
  }

  T* data() const { return data_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

 private:
  void Release() {
    if (data_ == nullptr) return;
    if (kPinnedHost) {
      cudaFreeHost(data_);
    } else {
      cudaFree(data_);
    }
    data_ = nullptr;
    count_ = 0;
  }

  T* data_ = nullptr;
  size_t count_ = 0;
};

template <typename T>
using DeviceBuffer = Buffer<T, false>;
template <typename T>
using PinnedBuffer = Buffer<T, true>;

}  // namespace ernie::cuda
