// y = x W^T (+ b) on the CPU, float32 activations and accumulation, weights
// read as stored (F32, F16 or BF16) and widened on the fly, so a decode step
// streams each weight byte from memory exactly once.
#pragma once

#include <cstdint>

#include "engine/model/tensor_view.h"
#include "engine/util/thread_pool.h"

namespace ernie::cpu {

// x: [m, k] row-major float32; weight: [n, k] (a checkpoint view);
// bias: [n] float32 or nullptr; y: [m, n] row-major float32 (overwritten).
// Work is split across the pool by output rows of W.
void Linear(const float* x, int64_t m, int64_t k, const TensorView& weight, const float* bias, float* y,
            ThreadPool& pool);

// Same, for one row of the weight range [n_begin, n_end) (used for the lm_head
// of a few rows, and by the threaded driver above).
void LinearRows(const float* x, int64_t m, int64_t k, const TensorView& weight, const float* bias, float* y,
                int64_t y_stride, int64_t n_begin, int64_t n_end);

}  // namespace ernie::cpu
