// Samples device sample rows (backend.h's DeviceSampleRow) on the host with
// exactly the device's semantics: the row's edits (logit_bias and penalties,
// engine/sample/logit_edit.h) applied to its logits row, the min_tokens ban
// by the ids the row carries, then the host Sampler with no processor left;
// logprobs of the raw, unedited row. It is how a backend without a device
// sampler of its own offers ForwardAndSample (the instant backend), and the
// reference a device sampler is tested against.
//
// Not thread-safe (it owns a Sampler and scratch rows).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/backend/backend.h"
#include "engine/sample/sampler.h"

namespace ernie {

class HostRowSampler {
 public:
  static absl::StatusOr<HostRowSampler> Create(int32_t vocab_size);

  // `logits`: [logit rows, vocab]; rows[i] reads its logit_row and writes
  // out[i]. The logits are not modified. InvalidArgument as the Sampler's
  // (a row without a finite logit) and for rows out of range.
  absl::Status Sample(std::span<const float> logits, std::span<const DeviceSampleRow> rows,
                      std::span<SampledToken> out);

  // Rows sampled so far, of which edited, and of those that wanted logprobs
  // beside their edits (a raw pass on the device).
  int64_t rows_sampled() const { return rows_sampled_; }
  int64_t edited_rows() const { return edited_rows_; }
  int64_t raw_passes() const { return raw_passes_; }

 private:
  explicit HostRowSampler(Sampler sampler, int32_t vocab) : sampler_(std::move(sampler)), vocab_(vocab) {}

  Sampler sampler_;
  int32_t vocab_ = 0;
  std::vector<float> row_, raw_;  // [vocab] the row being edited, and a copy for the raw pass
  int64_t rows_sampled_ = 0, edited_rows_ = 0, raw_passes_ = 0;
};

}  // namespace ernie
