// Command-line surface of `ernie-generate` (stable: scripts and tests use it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ernie {

struct GenerateFlags {
  std::string model_dir;
  std::vector<int32_t> prompt_ids;
  int max_tokens = 16;
  float temperature = 0.0f;
  uint64_t seed = 0;
  int top_logprobs = 0;
  std::string backend = "cpu";
  std::string dump_logits_path;  // empty: no dump
  int64_t block_size = 16;
  int64_t prefill_chunk = 0;     // 0: whole prompt in one step (up to max tokens per step)
  int threads = 0;               // 0: all hardware threads
  bool ignore_eos = false;
  bool help = false;
};

// Parses argv (without argv[0]). InvalidArgument names the flag and why.
absl::StatusOr<GenerateFlags> ParseGenerateFlags(const std::vector<std::string>& args);
std::string GenerateUsage();

}  // namespace ernie
