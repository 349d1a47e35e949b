#include "tools/quantize/output_checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "engine/model/safetensors_writer.h"
#include "engine/util/half.h"

namespace ernie::quantize {

namespace {

absl::Status IoError(const std::string& what, const std::string& path) {
  return absl::InternalError(absl::StrCat(what, " '", path, "': ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<OutputCheckpoint>> OutputCheckpoint::Create(const Checkpoint& input,
                                                                           const std::string& spool_dir) {
  std::string path = (std::filesystem::path(spool_dir) / ".ernie-quantize-spool.XXXXXX").string();
  const int fd = mkstemp(path.data());
  if (fd < 0) return IoError("cannot create the spool file", path);
  unlink(path.c_str());  // the open descriptor keeps it until the process ends
  std::unique_ptr<OutputCheckpoint> out(new OutputCheckpoint(fd, path));
  for (const auto& [name, view] : input.tensors())
    out->tensors_[name] = Tensor{std::string(DTypeSafetensorsName(view.dtype)), view.shape, &view, 0, view.bytes.size()};
  return out;
}

OutputCheckpoint::OutputCheckpoint(int spool_fd, std::string spool_path)
    : spool_fd_(spool_fd), spool_path_(std::move(spool_path)) {}

OutputCheckpoint::~OutputCheckpoint() {
  if (spool_fd_ >= 0) close(spool_fd_);
}

void OutputCheckpoint::Spool(const std::string& name, std::string dtype, std::vector<int64_t> shape, const void* data,
                             size_t size) {
  if (!status_.ok()) return;
  const auto* bytes = static_cast<const uint8_t*>(data);
  for (size_t done = 0; done < size;) {
    const ssize_t n = pwrite(spool_fd_, bytes + done, size - done, static_cast<off_t>(spool_end_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      status_ = IoError(absl::StrCat("cannot spool tensor '", name, "' to"), spool_path_);
      return;
    }
    done += static_cast<size_t>(n);
  }
  tensors_[name] = Tensor{std::move(dtype), std::move(shape), nullptr, spool_end_, size};
  spool_end_ += size;
}

void OutputCheckpoint::ReplaceFloat(const TensorView& source, const std::vector<float>& values,
                                    std::optional<DType> dtype) {
  const DType as = dtype.value_or(source.dtype);
  const std::string name(DTypeSafetensorsName(as));
  switch (as) {
    case DType::kF32: Spool(source.name, name, source.shape, values.data(), values.size() * sizeof(float)); break;
    case DType::kBF16:
    case DType::kF16: {
      std::vector<uint16_t> half(values.size());
      for (size_t i = 0; i < values.size(); ++i)
        half[i] = as == DType::kBF16 ? FloatToBf16(values[i]) : FloatToF16(values[i]);
      Spool(source.name, name, source.shape, half.data(), half.size() * sizeof(uint16_t));
      break;
    }
    case DType::kI32: break;  // never a float tensor
  }
}

void OutputCheckpoint::ReplaceWithAwq(const std::string& prefix, const AwqTensors& q) {
  tensors_.erase(prefix + ".weight");
  const int64_t groups = q.in / q.group;
  Spool(prefix + ".qweight", "I32", {q.in, q.out / 8}, q.qweight.data(), q.qweight.size() * sizeof(int32_t));
  Spool(prefix + ".qzeros", "I32", {groups, q.out / 8}, q.qzeros.data(), q.qzeros.size() * sizeof(int32_t));
  Spool(prefix + ".scales", "F16", {groups, q.out}, q.scales.data(), q.scales.size() * sizeof(uint16_t));
}

int64_t OutputCheckpoint::total_bytes() const {
  int64_t n = 0;
  for (const auto& [name, t] : tensors_) n += static_cast<int64_t>(t.size);
  return n;
}

absl::Status OutputCheckpoint::Write(const std::string& dir) const {
  if (!status_.ok()) return status_;
  std::vector<model::SafetensorsTensorSpec> specs;
  std::vector<const Tensor*> order;
  for (const auto& [name, t] : tensors_) {
    specs.push_back({name, t.dtype, t.shape});
    order.push_back(&t);
  }
  auto fill = [this, &order](size_t index, uint64_t offset, std::span<uint8_t> chunk) -> absl::Status {
    const Tensor& t = *order[index];
    if (t.source != nullptr) {
      std::memcpy(chunk.data(), t.source->bytes.data() + offset, chunk.size());
      return absl::OkStatus();
    }
    for (size_t done = 0; done < chunk.size();) {
      const ssize_t n = pread(spool_fd_, chunk.data() + done, chunk.size() - done,
                              static_cast<off_t>(t.spool_offset + offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return IoError("cannot read back the spool file", spool_path_);
      done += static_cast<size_t>(n);
    }
    return absl::OkStatus();
  };
  return model::WriteSafetensors((std::filesystem::path(dir) / "model.safetensors").string(), specs, fill);
}

}  // namespace ernie::quantize
