#include "engine/backend/cuda/device_awq_linear.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/kernels/awq_repack.h"
#include "engine/util/status_macros.h"

namespace ernie::cuda {

namespace {

// Rows of `rows` x (sum of the parts' widths), each part contributing its
// row r, `width(part)` elements of T: the column concatenation of the parts.
template <typename T, typename Tensor, typename Width>
std::vector<T> ConcatColumns(std::initializer_list<const AwqLinearWeights*> parts, int64_t rows, Tensor tensor,
                             Width width) {
  int64_t total = 0;
  for (const AwqLinearWeights* p : parts) total += width(*p);
  std::vector<T> out(static_cast<size_t>(rows * total));
  int64_t column = 0;
  for (const AwqLinearWeights* p : parts) {
    const auto* src = static_cast<const T*>(tensor(*p)->data());
    const int64_t w = width(*p);
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(out.data() + r * total + column, src + r * w, static_cast<size_t>(w) * sizeof(T));
    column += w;
  }
  return out;
}

template <typename T>
absl::StatusOr<DeviceBuffer<T>> Upload(const std::vector<T>& host, const std::string& what) {
  ERNIE_ASSIGN_OR_RETURN(DeviceBuffer<T> buf, DeviceBuffer<T>::Allocate(host.size(), what));
  ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(buf.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
                             "cudaMemcpy of " + what);
  return buf;
}

}  // namespace

absl::StatusOr<DeviceAwqLinear> UploadAwqLinears(std::initializer_list<const AwqLinearWeights*> parts) {
  const AwqLinearWeights& first = **parts.begin();
  const int64_t k = first.in_features(), group = first.group_size, groups = k / group;
  std::string what;
  int64_t n = 0;
  for (const AwqLinearWeights* p : parts) {
    what += (what.empty() ? "" : " + ") + p->qweight->name;
    n += p->out_features();
  }
  const auto qweight = ConcatColumns<int32_t>(
      parts, k, [](const AwqLinearWeights& p) { return p.qweight; }, [](const AwqLinearWeights& p) { return p.out_features() / 8; });
  const auto qzeros = ConcatColumns<int32_t>(
      parts, groups, [](const AwqLinearWeights& p) { return p.qzeros; }, [](const AwqLinearWeights& p) { return p.out_features() / 8; });
  const auto scales = ConcatColumns<uint16_t>(
      parts, groups, [](const AwqLinearWeights& p) { return p.scales; }, [](const AwqLinearWeights& p) { return p.out_features(); });
  auto packed = RepackAwqLinear({.qweight = qweight, .qzeros = qzeros, .scales = scales, .k = static_cast<int32_t>(k),
                                 .n = static_cast<int32_t>(n), .group_size = static_cast<int32_t>(group)});
  if (!packed.ok())
    return absl::InvalidArgumentError(absl::StrCat(what, ": the CUDA int4 kernels cannot take this linear: ",
                                                   packed.status().message()));
  DeviceAwqLinear d{.n = static_cast<int32_t>(n), .k = static_cast<int32_t>(k), .group_size = static_cast<int32_t>(group)};
  ERNIE_ASSIGN_OR_RETURN(d.packed, Upload(packed->packed, what + " (packed int4)"));
  ERNIE_ASSIGN_OR_RETURN(d.records, Upload(packed->records, what + " (scales and zeros)"));
  return d;
}

}  // namespace ernie::cuda
