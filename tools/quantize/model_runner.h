// Runs token sequences through the CPU backend in float32, for calibration
// (ernie-quantize) and for comparing a quantized model with its float
// original (ernie-quant-eval).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/cpu/cpu_backend.h"

namespace ernie::quantize {

// Token ids for `text` from the tokenizer of `model_dir` (tokenizer.model and
// its JSON files), at most `max_tokens`. A model directory without a
// tokenizer (the tiny test checkpoints) gets the text's bytes mapped into
// the vocabulary, id = 3 + byte % (vocab - 3): deterministic text-shaped input.
absl::StatusOr<std::vector<int32_t>> TokensForModel(const std::string& model_dir, const std::string& text,
                                                    int64_t vocab_size, int64_t max_tokens);

// Reads a whole text file; NotFound naming it.
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

// Runs `tokens` as one sequence from position 0, in chunks of at most
// `chunk` tokens. `logits`, when not null, receives [tokens, vocab]
// float32 logits of every position.
absl::Status RunSequence(cpu::CpuBackend& backend, const std::vector<int32_t>& tokens, int64_t chunk,
                         std::vector<float>* logits);

// A CPU backend with KV room for `tokens` tokens in one sequence.
absl::StatusOr<std::unique_ptr<cpu::CpuBackend>> CreateRunnerBackend(const LoadedModel& model, int64_t tokens,
                                                                      int threads,
                                                                      cpu::LinearInputObserver observer = {});

// Tokens per Forward of RunSequence (the backend's workspace is sized for it).
inline constexpr int64_t kRunnerChunk = 128;

}  // namespace ernie::quantize
