// Host <-> device copies for the CUDA kernel tests: each failure is a test
// failure (EXPECT), never an exception or an exit.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "engine/backend/cuda/device_buffer.h"

namespace ernie::testing {

// A device copy of `host` (one element allocated when it is empty).
template <typename T>
cuda::DeviceBuffer<T> Upload(const std::vector<T>& host) {
  auto buffer = cuda::DeviceBuffer<T>::Allocate(std::max<size_t>(host.size(), 1), "test input");
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  if (!host.empty()) {
    EXPECT_EQ(cudaMemcpy(buffer->data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  return std::move(*buffer);
}

// `count` zeroed elements on the device.
template <typename T>
cuda::DeviceBuffer<T> Zeros(size_t count) {
  auto buffer = cuda::DeviceBuffer<T>::Allocate(count, "test output");
  EXPECT_TRUE(buffer.ok()) << buffer.status();
  EXPECT_EQ(cudaMemset(buffer->data(), 0, buffer->bytes()), cudaSuccess);
  return std::move(*buffer);
}

// The whole buffer back on the host, after the device has finished its work.
template <typename T>
std::vector<T> Download(const cuda::DeviceBuffer<T>& device) {
  std::vector<T> host(device.size());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(host.data(), device.data(), device.bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

}  // namespace ernie::testing
