// A typed, read-only view of one tensor's bytes inside a mapped checkpoint.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/model/dtype.h"

namespace ernie {

struct TensorView {
  std::string name;            // e.g. "model.layers.0.self_attn.q_proj.weight"
  std::string file;            // file it lives in, for error messages
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // row-major; [] for a scalar
  std::span<const uint8_t> bytes;  // exactly numel * DTypeSize(dtype) bytes

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  const void* data() const { return bytes.data(); }
};

// "[1024, 2048]" for messages.
std::string ShapeToString(const std::vector<int64_t>& shape);

}  // namespace ernie
