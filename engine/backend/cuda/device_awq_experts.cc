#include "engine/backend/cuda/device_awq_experts.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/awq_expert_pack.h"
#include "engine/util/status_macros.h"

namespace ernie::cuda {

namespace {

AwqRawLinear RawOf(const AwqLinearWeights& w) {
  const auto k = w.in_features(), n = w.out_features();
  return {.qweight = {static_cast<const int32_t*>(w.qweight->data()), static_cast<size_t>(w.qweight->numel())},
          .qzeros = {static_cast<const int32_t*>(w.qzeros->data()), static_cast<size_t>(w.qzeros->numel())},
          .scales = {static_cast<const uint16_t*>(w.scales->data()), static_cast<size_t>(w.scales->numel())},
          .k = static_cast<int32_t>(k),
          .n = static_cast<int32_t>(n),
          .group_size = static_cast<int32_t>(w.group_size)};
}

// "model.layers.1.mlp.experts.3" from its gate_proj's qweight tensor name.
std::string MlpName(const MlpWeights& e) {
  const std::string& name = e.gate_proj.awq.qweight->name;
  const auto at = name.rfind(".gate_proj");
  return at == std::string::npos ? name : name.substr(0, at);
}

AwqMlpRaw RawOf(const MlpWeights& e) {
  return {.gate = RawOf(e.gate_proj.awq), .up = RawOf(e.up_proj.awq), .down = RawOf(e.down_proj.awq), .name = MlpName(e)};
}

absl::StatusOr<DeviceBuffer<uint32_t>> Upload(const std::vector<uint32_t>& host, const std::string& what) {
  ERNIE_ASSIGN_OR_RETURN(DeviceBuffer<uint32_t> buf, DeviceBuffer<uint32_t>::Allocate(host.size(), what));
  ERNIE_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(buf.data(), host.data(), host.size() * sizeof(uint32_t), cudaMemcpyHostToDevice),
      "cudaMemcpy of " + what);
  return buf;
}

}  // namespace

absl::StatusOr<DeviceAwqExperts> UploadAwqExperts(const MoeLayerWeights& m, int64_t width) {
  std::vector<AwqMlpRaw> routed;
  routed.reserve(m.experts.size());
  for (const MlpWeights& e : m.experts) routed.push_back(RawOf(e));
  const AwqMlpRaw shared = m.has_shared ? RawOf(m.shared) : AwqMlpRaw{};
  ERNIE_ASSIGN_OR_RETURN(const AwqExpertStacks s, StackAwqExperts(routed, m.has_shared ? &shared : nullptr, width));
  const std::string what = routed[0].name + " .. (all experts' int4 ";
  DeviceAwqExperts d{.experts = s.experts, .hidden = s.hidden, .width = s.width, .group_size = s.group_size};
  ERNIE_ASSIGN_OR_RETURN(d.gate_up_packed, Upload(s.gate_up_packed, what + "gate|up)"));
  ERNIE_ASSIGN_OR_RETURN(d.gate_up_records, Upload(s.gate_up_records, what + "gate|up scales and zeros)"));
  ERNIE_ASSIGN_OR_RETURN(d.down_packed, Upload(s.down_packed, what + "down)"));
  ERNIE_ASSIGN_OR_RETURN(d.down_records, Upload(s.down_records, what + "down scales and zeros)"));
  return d;
}

}  // namespace ernie::cuda
