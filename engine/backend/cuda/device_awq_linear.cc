#include "engine/backend/cuda/device_awq_linear.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "engine/util/half.h"
#include "engine/util/status_macros.h"

namespace ernie::cuda {

namespace {

template <typename T>
absl::StatusOr<DeviceBuffer<T>> Upload(const std::vector<T>& host, const std::string& what) {
  ERNIE_ASSIGN_OR_RETURN(DeviceBuffer<T> buf, DeviceBuffer<T>::Allocate(host.size(), what));
  ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(buf.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
                             "cudaMemcpy of " + what);
  return buf;
}

}  // namespace

AwqRows RepackAwqRows(std::initializer_list<const AwqLinearWeights*> parts) {
  const AwqLinearWeights& first = **parts.begin();
  AwqRows out;
  out.k = static_cast<int32_t>(first.in_features());
  out.group_size = static_cast<int32_t>(first.group_size);
  for (const AwqLinearWeights* p : parts) out.n += static_cast<int32_t>(p->out_features());
  const int64_t k = out.k, groups = k / out.group_size;
  out.rows.assign(static_cast<size_t>(int64_t{out.n} * (k / 8)), 0u);
  out.scales.resize(static_cast<size_t>(int64_t{out.n} * groups * 2));
  int64_t row0 = 0;  // the part's first output row in the concatenation
  for (const AwqLinearWeights* p : parts) {
    const int64_t n = p->out_features();
    const auto* qweight = static_cast<const int32_t*>(p->qweight->data());  // [k, n/8]
    const auto* qzeros = static_cast<const int32_t*>(p->qzeros->data());    // [groups, n/8]
    const auto* scales = static_cast<const uint16_t*>(p->scales->data());   // [groups, n] fp16
    for (int64_t i = 0; i < k; ++i)
      for (int64_t o = 0; o < n; ++o) {
        const auto q = static_cast<uint32_t>(AwqNibble(qweight[i * (n / 8) + o / 8], static_cast<int>(o % 8)));
        out.rows[static_cast<size_t>((row0 + o) * (k / 8) + i / 8)] |= q << (4 * (i % 8));
      }
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t o = 0; o < n; ++o) {
        const float s = F16ToFloat(scales[g * n + o]);
        const auto z = static_cast<float>(AwqNibble(qzeros[g * (n / 8) + o / 8], static_cast<int>(o % 8)));
        const size_t at = static_cast<size_t>(((row0 + o) * groups + g) * 2);
        out.scales[at] = s;
        out.scales[at + 1] = -z * s;  // exact: z has 4 bits, s 11
      }
    row0 += n;
  }
  return out;
}

absl::StatusOr<DeviceAwqLinear> UploadAwqLinears(std::initializer_list<const AwqLinearWeights*> parts) {
  std::string what;
  for (const AwqLinearWeights* p : parts) what += (what.empty() ? "" : " + ") + p->qweight->name;
  const AwqLinearWeights& first = **parts.begin();
  if (first.group_size % 32 != 0 || first.in_features() % first.group_size != 0)
    return absl::InvalidArgumentError(absl::StrCat(what, ": the CUDA int4 kernels need a group size that is a ",
                                                   "multiple of 32 and divides in_features (", first.group_size,
                                                   ", ", first.in_features(), ")"));
  const AwqRows host = RepackAwqRows(parts);
  DeviceAwqLinear d{.n = host.n, .k = host.k, .group_size = host.group_size};
  ERNIE_ASSIGN_OR_RETURN(d.rows, Upload(host.rows, what + " (int4 rows)"));
  ERNIE_ASSIGN_OR_RETURN(d.scales, Upload(host.scales, what + " (scales and zeros)"));
  return d;
}

}  // namespace ernie::cuda
