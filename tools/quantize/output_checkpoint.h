// The tensors of the checkpoint ernie-quantize writes: every tensor of the
// input, except those it replaces (folded norms and biases, the MoE router,
// and each quantized linear's .weight, which becomes .qweight/.qzeros/.scales).
// Unchanged tensors are copied straight from the input's mapping. Replaced
// tensors wait in a spool file in the output folder (unlinked at once, so it
// never outlives the process), not in memory: the 21B-A3B's int4 output is
// ~12 GB, which would otherwise all be held until Write.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/checkpoint.h"
#include "tools/quantize/group_quantizer.h"

namespace ernie::quantize {

class OutputCheckpoint {
 public:
  // Starts as a copy of every tensor of `input` (which must outlive this),
  // spooling replacements in `spool_dir`.
  static absl::StatusOr<std::unique_ptr<OutputCheckpoint>> Create(const Checkpoint& input,
                                                                  const std::string& spool_dir);
  ~OutputCheckpoint();
  OutputCheckpoint(const OutputCheckpoint&) = delete;
  OutputCheckpoint& operator=(const OutputCheckpoint&) = delete;

  // Replaces tensor `source` (same name and shape) by `values` [numel],
  // rounded to the source's dtype, or stored as `dtype` when given (a float
  // dtype: a scaled router is kept in float32 rather than rounded again).
  void ReplaceFloat(const TensorView& source, const std::vector<float>& values, std::optional<DType> dtype = {});
  // Drops `prefix`.weight and adds `prefix`.{qweight, qzeros, scales}.
  void ReplaceWithAwq(const std::string& prefix, const AwqTensors& tensors);

  // The first spool write that failed (a full disk), or OK. Replacements
  // after a failure are dropped; check this after each layer.
  const absl::Status& status() const { return status_; }

  // Writes DIR/model.safetensors (status() first, if it is not OK).
  absl::Status Write(const std::string& dir) const;
  // Bytes of tensor data in the output.
  int64_t total_bytes() const;

 private:
  OutputCheckpoint(int spool_fd, std::string spool_path);
  struct Tensor {
    std::string dtype;           // safetensors spelling
    std::vector<int64_t> shape;
    const TensorView* source = nullptr;  // copied as is when set
    uint64_t spool_offset = 0;           // otherwise these bytes of the spool
    uint64_t size = 0;
  };
  void Spool(const std::string& name, std::string dtype, std::vector<int64_t> shape, const void* data, size_t size);

  std::map<std::string, Tensor> tensors_;  // by name (the file's order)
  int spool_fd_ = -1;
  std::string spool_path_;  // for messages; already unlinked
  uint64_t spool_end_ = 0;
  absl::Status status_;
};

}  // namespace ernie::quantize
