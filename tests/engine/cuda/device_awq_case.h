// An AwqCase (awq_test_case.h) repacked into the int4 kernels' layout and
// copied to the device, for the kernel tests that launch on it.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/kernels/awq_gemm.h"
#include "engine/backend/cuda/kernels/awq_repack.h"
#include "tests/engine/cuda/awq_test_case.h"
#include "tests/engine/cuda/device_copies.h"

namespace ernie::testing {

struct DeviceAwqCase {
  explicit DeviceAwqCase(const AwqCase& c) {
    auto repacked = cuda::RepackAwqLinear(c.Raw());
    EXPECT_TRUE(repacked.ok()) << repacked.status();
    packed = Upload(repacked->packed);
    records = Upload(repacked->records);
    view = {.packed = packed.data(), .records = records.data(), .n = c.n, .k = c.k, .group_size = c.group};
  }
  cuda::DeviceBuffer<uint32_t> packed, records;
  cuda::AwqWeightsView view;
};

}  // namespace ernie::testing
