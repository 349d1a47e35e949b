// Row-wise building blocks of the ERNIE-4.5 forward pass on the CPU, all in
// float32. Shapes are in the comments; rows are contiguous.
#pragma once

#include <cstdint>
#include <span>

#include "engine/model/tensor_view.h"

namespace ernie::cpu {

// out[t, :] = embedding[ids[t], :] widened to float32. out: [ids.size(), hidden].
void EmbeddingGather(const TensorView& embedding, std::span<const int32_t> ids, float* out);

// out[r] = x[r] * rsqrt(mean(x[r]^2) + eps) * weight, for `rows` rows of `dim`.
// out may alias x.
void RmsNorm(const float* x, int64_t rows, int64_t dim, const float* weight, float eps, float* out);

// x[i] += y[i].
void AddInPlace(float* x, const float* y, int64_t n);

// out[r, i] = silu(gate[r, i]) * up[r, i]; gate/up/out: [rows, dim]; out may alias gate.
void SiluAndMul(const float* gate, const float* up, int64_t rows, int64_t dim, float* out);

// Interleaved ("GPT-J") rotary embedding in float32: dimensions (2i, 2i+1) of
// every head rotate together by angle position * theta^(-2i/head_dim).
// x: [tokens, heads * head_dim], positions: [tokens].
void ApplyRotaryInterleaved(float* x, int64_t tokens, int64_t heads, int64_t head_dim,
                            std::span<const int32_t> positions, const float* inv_freq);

// inv_freq[i] = 1 / theta^(2i / head_dim), as float32, i < head_dim / 2.
void RotaryInverseFrequencies(double theta, int64_t head_dim, float* inv_freq);

// Widens a 1-D tensor (norm weight, bias) to float32.
void WidenToFloat(const TensorView& t, float* out);

}  // namespace ernie::cpu
