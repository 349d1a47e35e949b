// A mixture-of-experts layer's AWQ int4 experts on the device: the stacks
// awq_expert_pack.h builds (routed experts, then the shared experts as
// pseudo-experts; gate|up interleaved by 8), as the grouped kernel
// (kernels/grouped_awq_gemv.h) and, per expert, the dequantiser
// (kernels/awq_gemm.h) read them.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/kernels/grouped_awq_gemv.h"
#include "engine/model/ernie4_5_weights.h"

namespace ernie::cuda {

struct DeviceAwqExperts {
  DeviceBuffer<uint32_t> gate_up_packed;   // [E + S][AwqPackedWords(2 I, H)]
  DeviceBuffer<uint32_t> gate_up_records;  // [E + S][AwqRecordWords(2 I, H, group_size)]
  DeviceBuffer<uint32_t> down_packed;      // [E + S][AwqPackedWords(H, I)]
  DeviceBuffer<uint32_t> down_records;     // [E + S][AwqRecordWords(H, I, group_size)]
  int32_t experts = 0, hidden = 0, width = 0, group_size = 0;  // E + S, H, I

  bool empty() const { return experts == 0; }
  AwqExpertsView gate_up() const {
    return {gate_up_packed.data(), gate_up_records.data(), experts, 2 * width, hidden, group_size};
  }
  AwqExpertsView down() const { return {down_packed.data(), down_records.data(), experts, hidden, width, group_size}; }
  int64_t bytes() const {
    return static_cast<int64_t>(gate_up_packed.bytes() + gate_up_records.bytes() + down_packed.bytes() +
                                down_records.bytes());
  }
};

// Repacks and uploads the experts of `m` (every linear AWQ, no biases: the
// caller checked), `width` = moe_intermediate_size. InvalidArgument naming
// the tensor when a shape does not fit the kernels; ResourceExhausted when
// the device is full.
absl::StatusOr<DeviceAwqExperts> UploadAwqExperts(const MoeLayerWeights& m, int64_t width);

}  // namespace ernie::cuda
