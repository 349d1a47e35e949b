// What one DeviceSampler call edits and which of its rows take the raw
// pass, worked out on the host before anything is uploaded (device_sampler.h
// says why there is a raw pass):
//   - one edit row per edited logits row, owned by the first sample row that
//     reads it (an n > 1 fork's samples share their row, so they must have
//     the same params and position): its edits (logit_bias, penalties) and
//     its min_tokens ban, laid out as the edit kernel reads them;
//   - one raw-pass slot per edited logits row that a row asking for
//     logprobs reads (a fork's samples share it).
// Host only: the tests run it without a device.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "engine/backend/backend.h"
#include "engine/backend/cuda/kernels/logit_edits.h"

namespace ernie::cuda {

class SampleEditPlan {
 public:
  // Plans `rows` (reading logits rows rows[i].logit_row - first_logit_row of
  // the step's logits). InvalidArgument when rows that share a logits row
  // would edit it differently.
  absl::Status Build(int32_t first_logit_row, std::span<const DeviceSampleRow> rows);

  // The edit kernel's rows (logit_row relative to first_logit_row).
  std::span<const LogitEditRow> edit_rows() const { return edit_rows_; }
  int32_t num_edits() const { return num_edits_; }
  int32_t num_bans() const { return num_bans_; }
  int32_t num_raw() const { return num_raw_; }
  // Row i's raw-pass slot, or -1 (no logprobs, or its logits row is not edited).
  std::span<const int32_t> raw_index() const { return raw_index_; }

  // Writes every edit row's edits into edits[first_edit ..] (num_edits()
  // entries) and its banned ids into bans[first_ban ..] (num_bans()).
  void CopyEdits(LogitEdit* edits, int32_t* bans) const;

  // The raw logit of `token`, drawn from row's (edited) logits row: what the
  // edit kernel found there (`originals`, one float an edit) when an edit
  // touched it, else `token_logit`, the value the row holds there, which no
  // edit changed. NaN reads as -inf, as in the sampling kernel.
  float RawLogitOf(const DeviceSampleRow& row, int32_t token, float token_logit,
                   std::span<const float> originals) const;

 private:
  struct EditedRow {
    int32_t first_edit = 0;
    const SampleLogitEdits* edits = nullptr;  // null: bans only
  };

  std::vector<LogitEditRow> edit_rows_;
  std::vector<const DeviceSampleRow*> sources_;      // the row whose edits and bans each edit row applies
  absl::flat_hash_map<int32_t, EditedRow> edited_;  // logits row (absolute) -> its edits
  std::vector<int32_t> raw_index_;
  int32_t num_edits_ = 0, num_bans_ = 0, num_raw_ = 0;
};

}  // namespace ernie::cuda
