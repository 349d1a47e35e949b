// What the scheduler hands a backend for one forward step: a flat list of
// tokens from several sequences (prefill chunks and decodes mixed, no
// separate phases), where each sequence's keys and values live (its block
// table into the paged KV cache), and which tokens need logits.
#pragma once

#include <cstdint>
#include <span>

namespace ernie {

struct SequenceSlice {
  int32_t first_token = 0;        // index into StepBatch::token_ids of this sequence's first new token
  int32_t num_new_tokens = 0;     // tokens computed this step (a prefill chunk, or 1 for a decode)
  int32_t num_cached_tokens = 0;  // tokens of this sequence already in the KV cache
  // Block ids covering positions [0, num_cached_tokens + num_new_tokens):
  // position p lives in block block_table[p / block_size], row p % block_size.
  std::span<const int32_t> block_table;
};

// A token input the host does not know yet (overlapped steps): the token
// the most recently launched step sampled in its device sample row
// `sample_row` (DeviceSamplingRequest::rows), which the backend writes into
// token_ids[token_index] on its device before the step runs. The host's
// token_ids entry there is a placeholder (any id in the vocabulary).
struct FedBackToken {
  int32_t token_index = 0;
  int32_t sample_row = 0;
};

struct StepBatch {
  std::span<const int32_t> token_ids;   // [num_tokens]
  std::span<const int32_t> positions;   // [num_tokens] absolute positions (rotary); num_cached + offset
  std::span<const SequenceSlice> sequences;  // contiguous, ordered by first_token, covering all tokens
  // Indices into token_ids whose logits are wanted, in output order
  // (usually the last token of each sequence that finishes its prompt or decodes).
  std::span<const int32_t> logit_token_indices;
  // Only with Backend::LaunchForwardAndSample: inputs taken from the previous
  // launch's samples, in token order.
  std::span<const FedBackToken> fed_back_tokens;
};

}  // namespace ernie
