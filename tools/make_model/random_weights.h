// Deterministic random weight values for a tensor, produced in any chunk.
//
// Values come from a counter-based generator: element i of a tensor is a
// pure function of (seed, tensor name, i). So a chunk can be produced
// without the ones before it, the shard layout never changes a value, and
// the same seed always gives byte-identical files.
//
// Each value is approximately normal: the sum of four 16-bit uniforms from
// one splitmix64 output, rescaled to unit variance (Irwin-Hall; bounded at
// +-3.46 sigma, which is fine for random weights and far faster than
// Box-Muller: the 0.3B shape takes about a second).
#pragma once

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "tools/make_model/model_shape.h"
#include "tools/make_model/weight_dtype.h"

namespace ernie::make_model {

// The spreads chosen so a random model still gives peaked (not uniform)
// logits: embeddings N(0, 0.25^2); projections N(0, 1/fan_in), which keeps
// activations at unit scale through every layer; norm gains 1 + 0.1 z;
// biases N(0, 0.02^2).
inline constexpr float kEmbeddingStddev = 0.25f;
// Embedding rows from this id up to <|end_of_sentence|>, and every row after
// <|begin_of_sentence|> (masks, image/location tokens, rows past the
// tokenizer), hold no trained piece; they are scaled by kFillerEmbeddingScale.
// 8000 is TokenizerOptions::trained_vocab_size's default.
inline constexpr int64_t kFillerEmbeddingRowsBegin = 8000;
inline constexpr float kFillerEmbeddingScale = 0.02f;
inline constexpr float kNormGainStddev = 0.1f;
inline constexpr float kBiasStddev = 0.02f;

// Approximately standard-normal value number `index` of the stream `key`.
float StandardNormalAt(uint64_t key, uint64_t index);

// The stream key of one tensor under a run's --seed.
uint64_t TensorStreamKey(uint64_t seed, const TensorEntry& tensor);

// Value of element `index` of `tensor` (float32, before dtype rounding).
float WeightValueAt(uint64_t key, const TensorEntry& tensor, uint64_t index);

// Writes the bytes [byte_offset, byte_offset + out.size()) of `tensor`
// stored as `dtype` (little-endian; bf16/f16 rounded to nearest even).
// byte_offset and out.size() must be multiples of the element size.
absl::Status FillWeightBytes(uint64_t seed, const TensorEntry& tensor, WeightDtype dtype,
                             uint64_t byte_offset, std::span<uint8_t> out);

}  // namespace ernie::make_model
