// The prompts a serving benchmark sends: random English-like text of an exact
// token length (measured with the server's POST /tokenize), or a dataset file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/bench/serve/blocking_http_client.h"

namespace ernie::bench {

// Random prompts of common English words, or of decimal digits (one token
// per digit in most vocabularies, and low token ids: what a small-vocabulary
// test backend such as ernie-worker's `--backend instant` accepts).
enum class PromptStyle { kWords, kDigits };

struct BenchPrompt {
  std::string text;
  int prompt_tokens = 0;  // as /tokenize counted it (without special tokens); an estimate when `exact` is false
  int output_len = 0;     // max_tokens (and min_tokens) of the request
};

struct PromptSet {
  std::vector<BenchPrompt> prompts;
  bool exact = true;                  // every prompt_tokens was measured and equals what was asked
  std::vector<std::string> warnings;  // printed and recorded in the result
};

// Counts the tokens of `text` with POST /tokenize (vLLM's {"model", "prompt"}
// -> {"count" | "tokens"}; llama.cpp's {"content"} -> {"tokens"}). NotFound
// when the server has no such route.
absl::StatusOr<int> CountTokens(BlockingHttpClient* client, const std::string& model, const std::string& text);

// `num` distinct prompts of `input_len` tokens each (no shared prefix, so a
// prefix cache does not flatter the result), deterministic in `seed`.
absl::StatusOr<PromptSet> MakeRandomPrompts(BlockingHttpClient* client, const std::string& model, PromptStyle style,
                                            int num, int input_len, int output_len, uint64_t seed);

// Prompts from FILE, cycled to `num`: JSON lines of {"prompt": "...",
// optional "output_len"} or a ShareGPT JSON array (first human turn of each
// conversation). Token counts come from /tokenize when it exists.
absl::StatusOr<PromptSet> LoadDatasetPrompts(BlockingHttpClient* client, const std::string& model,
                                             const std::string& path, int num, int output_len);

}  // namespace ernie::bench
