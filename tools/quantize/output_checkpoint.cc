#include "tools/quantize/output_checkpoint.h"

#include <cstring>
#include <filesystem>

#include "engine/model/safetensors_writer.h"
#include "engine/util/half.h"

namespace ernie::quantize {

namespace {

template <typename T>
std::vector<uint8_t> BytesOf(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

}  // namespace

OutputCheckpoint::OutputCheckpoint(const Checkpoint& input) {
  for (const auto& [name, view] : input.tensors())
    tensors_[name] = Tensor{std::string(DTypeSafetensorsName(view.dtype)), view.shape, &view, {}};
}

void OutputCheckpoint::ReplaceFloat(const TensorView& source, const std::vector<float>& values,
                                    std::optional<DType> dtype) {
  const DType as = dtype.value_or(source.dtype);
  Tensor& t = tensors_[source.name];
  t.source = nullptr;
  t.dtype = std::string(DTypeSafetensorsName(as));
  switch (as) {
    case DType::kF32: t.bytes = BytesOf(values); break;
    case DType::kBF16:
    case DType::kF16: {
      std::vector<uint16_t> half(values.size());
      for (size_t i = 0; i < values.size(); ++i)
        half[i] = as == DType::kBF16 ? FloatToBf16(values[i]) : FloatToF16(values[i]);
      t.bytes = BytesOf(half);
      break;
    }
    case DType::kI32: break;  // never a float tensor
  }
}

void OutputCheckpoint::ReplaceWithAwq(const std::string& prefix, AwqTensors q) {
  tensors_.erase(prefix + ".weight");
  const int64_t groups = q.in / q.group;
  tensors_[prefix + ".qweight"] = Tensor{"I32", {q.in, q.out / 8}, nullptr, BytesOf(q.qweight)};
  tensors_[prefix + ".qzeros"] = Tensor{"I32", {groups, q.out / 8}, nullptr, BytesOf(q.qzeros)};
  tensors_[prefix + ".scales"] = Tensor{"F16", {groups, q.out}, nullptr, BytesOf(q.scales)};
}

int64_t OutputCheckpoint::total_bytes() const {
  int64_t n = 0;
  for (const auto& [name, t] : tensors_) n += static_cast<int64_t>(t.source ? t.source->bytes.size() : t.bytes.size());
  return n;
}

absl::Status OutputCheckpoint::Write(const std::string& dir) const {
  std::vector<model::SafetensorsTensorSpec> specs;
  std::vector<const Tensor*> order;
  for (const auto& [name, t] : tensors_) {
    specs.push_back({name, t.dtype, t.shape});
    order.push_back(&t);
  }
  auto fill = [&order](size_t index, uint64_t offset, std::span<uint8_t> chunk) -> absl::Status {
    const Tensor& t = *order[index];
    const uint8_t* src = t.source ? t.source->bytes.data() : t.bytes.data();
    std::memcpy(chunk.data(), src + offset, chunk.size());
    return absl::OkStatus();
  };
  return model::WriteSafetensors((std::filesystem::path(dir) / "model.safetensors").string(), specs, fill);
}

}  // namespace ernie::quantize
