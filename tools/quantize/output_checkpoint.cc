#include "tools/quantize/output_checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "engine/model/safetensors_writer.h"
#include "engine/util/half.h"
#include "engine/util/status_macros.h"

namespace ernie::quantize {

namespace {

absl::Status IoError(const std::string& what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " '", path, "': ", std::strerror(errno)));
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) absl::StrAppend(&text, i == 0 ? "" : ", ", shape[i]);
  return text + "]";
}

// The AWQ tensors that stand for prefix.weight [out, in] (AutoAWQ's "gemm"
// layout): qweight, qzeros, scales, in that order.
std::array<model::SafetensorsTensorSpec, 3> AwqSpecs(const std::string& prefix, int64_t in, int64_t out,
                                                     int64_t group) {
  const int64_t groups = in / group;
  return {{{prefix + ".qweight", "I32", {in, out / 8}},
           {prefix + ".qzeros", "I32", {groups, out / 8}},
           {prefix + ".scales", "F16", {groups, out}}}};
}

}  // namespace

absl::StatusOr<std::unique_ptr<OutputCheckpoint>> OutputCheckpoint::Create(const Checkpoint& input,
                                                                           const OutputPlan& plan,
                                                                           const std::string& dir) {
  // Every output tensor: the input's, less the quantized weights, plus their AWQ tensors.
  std::map<std::string, const OutputPlan::Quantized*> quantized;
  for (const OutputPlan::Quantized& q : plan.quantized) {
    const std::string weight = q.prefix + ".weight";
    ERNIE_RETURN_IF_ERROR(input.FindWithShape(weight, {q.out, q.in}).status());
    if (plan.group_size <= 0 || q.in % plan.group_size != 0 || q.out % 8 != 0)
      return absl::InvalidArgumentError(absl::StrCat("cannot plan '", weight, "' [", q.out, ", ", q.in,
                                                     "] as AWQ with group size ", plan.group_size));
    quantized[weight] = &q;
  }
  for (const std::string& name : plan.float32) ERNIE_RETURN_IF_ERROR(input.Find(name).status());
  std::vector<model::SafetensorsTensorSpec> specs;
  std::vector<const TensorView*> sources;
  for (const auto& [name, view] : input.tensors()) {
    if (const auto it = quantized.find(name); it != quantized.end()) {
      const OutputPlan::Quantized& q = *it->second;
      for (auto& spec : AwqSpecs(q.prefix, q.in, q.out, plan.group_size)) {
        specs.push_back(std::move(spec));
        sources.push_back(nullptr);
      }
      continue;
    }
    const DType dtype = plan.float32.count(name) != 0 ? DType::kF32 : view.dtype;
    specs.push_back({name, std::string(DTypeSafetensorsName(dtype)), view.shape});
    // A tensor whose dtype changes has no bytes to copy: its replacement must come.
    sources.push_back(dtype == view.dtype ? &view : nullptr);
  }
  ERNIE_ASSIGN_OR_RETURN(const model::SafetensorsLayout layout,
                         model::PlanSafetensors(specs, model::SafetensorsWriteOptions{}.metadata));

  const std::string final_path = (std::filesystem::path(dir) / "model.safetensors").string();
  const std::string temp_path = final_path + ".tmp";
  const int fd = open(temp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError("cannot create", temp_path);
  std::unique_ptr<OutputCheckpoint> out(new OutputCheckpoint(fd, temp_path, final_path));
  for (size_t i = 0; i < specs.size(); ++i) {
    out->tensors_[specs[i].name] =
        Tensor{sources[i], layout.file_offsets[i], layout.bytes[i], specs[i].dtype, specs[i].shape, false};
    out->data_bytes_ += layout.bytes[i];
  }
  // The whole file's size at once (sparse until written), then the prefix and header.
  if (ftruncate(fd, static_cast<off_t>(layout.file_bytes)) != 0) return IoError("cannot size", temp_path);
  const std::string head = layout.FileHead();
  ERNIE_RETURN_IF_ERROR(out->WriteAt(0, head.data(), head.size()));
  return out;
}

OutputCheckpoint::OutputCheckpoint(int fd, std::string temp_path, std::string final_path)
    : fd_(fd), temp_path_(std::move(temp_path)), final_path_(std::move(final_path)) {}

OutputCheckpoint::~OutputCheckpoint() {
  if (fd_ >= 0) close(fd_);
  if (!finished_) std::remove(temp_path_.c_str());
}

absl::Status OutputCheckpoint::WriteAt(uint64_t offset, const void* data, size_t size) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  for (size_t done = 0; done < size;) {
    const ssize_t n = pwrite(fd_, bytes + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return IoError("cannot write", temp_path_);
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

void OutputCheckpoint::WriteTensor(const std::string& name, const std::string& dtype,
                                   const std::vector<int64_t>& shape, const void* data, size_t size) {
  if (!status_.ok()) return;
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    status_ = absl::InternalError(absl::StrCat("tensor '", name, "' is not in the output's plan"));
    return;
  }
  Tensor& t = it->second;
  if (t.dtype != dtype || t.shape != shape || t.bytes != size) {
    status_ = absl::InternalError(absl::StrCat("tensor '", name, "' was planned as ", t.dtype, " ", ShapeText(t.shape),
                                               " but written as ", dtype, " ", ShapeText(shape)));
    return;
  }
  status_ = WriteAt(t.file_offset, data, size);
  t.written = status_.ok();
}

void OutputCheckpoint::ReplaceFloat(const TensorView& source, const std::vector<float>& values,
                                    std::optional<DType> dtype) {
  const DType as = dtype.value_or(source.dtype);
  const std::string name(DTypeSafetensorsName(as));
  switch (as) {
    case DType::kF32:
      WriteTensor(source.name, name, source.shape, values.data(), values.size() * sizeof(float));
      break;
    case DType::kBF16:
    case DType::kF16: {
      std::vector<uint16_t> half(values.size());
      for (size_t i = 0; i < values.size(); ++i)
        half[i] = as == DType::kBF16 ? FloatToBf16(values[i]) : FloatToF16(values[i]);
      WriteTensor(source.name, name, source.shape, half.data(), half.size() * sizeof(uint16_t));
      break;
    }
    case DType::kI32: break;  // never a float tensor
  }
}

void OutputCheckpoint::ReplaceWithAwq(const std::string& prefix, const AwqTensors& q) {
  const auto specs = AwqSpecs(prefix, q.in, q.out, q.group);
  const void* data[3] = {q.qweight.data(), q.qzeros.data(), q.scales.data()};
  const size_t bytes[3] = {q.qweight.size() * sizeof(int32_t), q.qzeros.size() * sizeof(int32_t),
                           q.scales.size() * sizeof(uint16_t)};
  for (size_t i = 0; i < specs.size(); ++i) WriteTensor(specs[i].name, specs[i].dtype, specs[i].shape, data[i], bytes[i]);
}

absl::Status OutputCheckpoint::Finish() {
  ERNIE_RETURN_IF_ERROR(status_);
  // Unchanged tensors straight from the input's mapping, in file order (the
  // map's), a bounded piece at a time so the page cache streams them.
  constexpr size_t kPiece = size_t{64} << 20;
  for (auto& [name, t] : tensors_) {
    if (t.written) continue;
    if (t.source == nullptr)
      return absl::InternalError(absl::StrCat("the output's planned tensor '", name, "' was never written"));
    for (size_t done = 0; done < t.bytes; done += kPiece)
      ERNIE_RETURN_IF_ERROR(WriteAt(t.file_offset + done, t.source->bytes.data() + done,
                                    std::min<size_t>(kPiece, t.bytes - done)));
    t.written = true;
  }
  if (close(fd_) != 0) {
    fd_ = -1;
    return IoError("cannot close", temp_path_);
  }
  fd_ = -1;
  if (std::rename(temp_path_.c_str(), final_path_.c_str()) != 0)
    return IoError(absl::StrCat("cannot rename '", temp_path_, "' to"), final_path_);
  finished_ = true;
  return absl::OkStatus();
}

}  // namespace ernie::quantize
