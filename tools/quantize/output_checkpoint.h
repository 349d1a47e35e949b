// The checkpoint ernie-quantize writes, DIR/model.safetensors: every tensor
// of the input, except those it replaces (folded norms and biases, the MoE
// router, and each quantized linear's .weight, which becomes
// .qweight/.qzeros/.scales).
//
// What will be replaced is known before the first layer is quantized (the
// OutputPlan), so the file's layout is fixed at Create: Hugging Face's
// (names sorted, data in that order), the same bytes model::WriteSafetensors
// writes. Each replacement is then written straight to its place as its
// layer finishes, and nothing waits in memory or in a second file: the
// 21B-A3B's int4 output is ~12 GB. Unchanged tensors are copied from the
// input's mapping at Finish, which checks that every planned replacement
// came and renames model.safetensors.tmp into place; a checkpoint that did
// not finish leaves no file behind.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/checkpoint.h"
#include "tools/quantize/group_quantizer.h"

namespace ernie::quantize {

// What the output replaces, known before any layer is quantized.
struct OutputPlan {
  struct Quantized {
    std::string prefix;  // "model.layers.0.self_attn.q_proj": prefix.weight [out, in] becomes AWQ tensors
    int64_t in = 0, out = 0;
  };
  std::vector<Quantized> quantized;
  int64_t group_size = 128;
  std::set<std::string> float32;  // tensors written as float32 whatever the input's dtype (a scaled router)
};

class OutputCheckpoint {
 public:
  // Plans DIR/model.safetensors from `input` (which must outlive this) and
  // `plan`, and creates DIR/model.safetensors.tmp. InvalidArgument when the
  // plan names a tensor the input lacks or a shape that does not match.
  static absl::StatusOr<std::unique_ptr<OutputCheckpoint>> Create(const Checkpoint& input, const OutputPlan& plan,
                                                                  const std::string& dir);
  ~OutputCheckpoint();  // removes the .tmp file unless Finish succeeded
  OutputCheckpoint(const OutputCheckpoint&) = delete;
  OutputCheckpoint& operator=(const OutputCheckpoint&) = delete;

  // Replaces tensor `source` (same name and shape) by `values` [numel],
  // rounded to the source's dtype, or stored as `dtype` when given (a float
  // dtype the plan also names: a scaled router is kept in float32 rather
  // than rounded again).
  void ReplaceFloat(const TensorView& source, const std::vector<float>& values, std::optional<DType> dtype = {});
  // Writes `prefix`.{qweight, qzeros, scales} in place of `prefix`.weight.
  void ReplaceWithAwq(const std::string& prefix, const AwqTensors& tensors);

  // The first write that failed (a full disk) or did not match the plan, or
  // OK. Replacements after a failure are dropped; check this after each layer.
  const absl::Status& status() const { return status_; }

  // Copies the unchanged tensors, checks that every planned replacement was
  // written, and moves the file into place (status() first, if not OK).
  absl::Status Finish();
  // Bytes of tensor data in the output.
  int64_t total_bytes() const { return static_cast<int64_t>(data_bytes_); }

 private:
  struct Tensor {
    const TensorView* source = nullptr;  // copied at Finish when nothing replaced it
    uint64_t file_offset = 0;
    uint64_t bytes = 0;
    std::string dtype;  // safetensors spelling
    std::vector<int64_t> shape;
    bool written = false;
  };
  OutputCheckpoint(int fd, std::string temp_path, std::string final_path);
  void WriteTensor(const std::string& name, const std::string& dtype, const std::vector<int64_t>& shape,
                   const void* data, size_t size);
  absl::Status WriteAt(uint64_t offset, const void* data, size_t size);

  std::map<std::string, Tensor> tensors_;  // by name
  int fd_ = -1;
  std::string temp_path_, final_path_;
  uint64_t data_bytes_ = 0;
  bool finished_ = false;
  absl::Status status_;
};

}  // namespace ernie::quantize
