// The tensors of the checkpoint ernie-quantize writes: every tensor of the
// input, except those it replaces (folded norms and biases, and each
// quantized linear's .weight, which becomes .qweight/.qzeros/.scales).
// Unchanged tensors are copied straight from the input's mapping.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/checkpoint.h"
#include "tools/quantize/group_quantizer.h"

namespace ernie::quantize {

class OutputCheckpoint {
 public:
  // Starts as a copy of every tensor of `input` (which must outlive this).
  explicit OutputCheckpoint(const Checkpoint& input);

  // Replaces tensor `source` (same name and shape) by `values` [numel],
  // rounded to the source's dtype, or stored as `dtype` when given (a float
  // dtype: a scaled router is kept in float32 rather than rounded again).
  void ReplaceFloat(const TensorView& source, const std::vector<float>& values, std::optional<DType> dtype = {});
  // Drops `prefix`.weight and adds `prefix`.{qweight, qzeros, scales}.
  void ReplaceWithAwq(const std::string& prefix, AwqTensors tensors);

  // Writes DIR/model.safetensors.
  absl::Status Write(const std::string& dir) const;
  // Bytes of tensor data in the output.
  int64_t total_bytes() const;

 private:
  struct Tensor {
    std::string dtype;           // safetensors spelling
    std::vector<int64_t> shape;
    const TensorView* source = nullptr;  // copied as is when set
    std::vector<uint8_t> bytes;          // otherwise these
  };
  std::map<std::string, Tensor> tensors_;  // by name (the file's order)
};

}  // namespace ernie::quantize
