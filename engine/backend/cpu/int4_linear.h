// y = x W^T (+ b) on the CPU for AWQ 4-bit weights (awq_format.h), the
// reference the CUDA int4 kernels are tested against: W is dequantised on
// the fly, one group of inputs by one block of output columns at a time
// (a tile that stays in L1), with float32 accumulation. Each packed word is
// read from memory once per call, so a decode step streams a quarter of the
// bytes of bf16 weights.
#pragma once

#include <cstdint>

#include "engine/model/ernie4_5_weights.h"
#include "engine/util/thread_pool.h"

namespace ernie::cpu {

// x: [m, in] row-major float32; w: AWQ weights of a [out, in] linear;
// bias: [out] float32 or nullptr; y: [m, out] row-major float32 (overwritten).
// Work is split across the pool by blocks of output columns.
void Int4Linear(const float* x, int64_t m, const AwqLinearWeights& w, const float* bias, float* y, ThreadPool& pool);

// The CPU backend's one entry for a bound linear: Int4Linear for AWQ weights,
// Linear (linear.h) for float ones. x: [m, in]; y: [m, out].
void ApplyLinear(const float* x, int64_t m, const LinearWeights& w, const float* bias, float* y, ThreadPool& pool);

}  // namespace ernie::cpu
