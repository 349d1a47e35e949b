#include "engine/backend/cuda/sample_edit_plan.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "engine/sample/logit_edit.h"

namespace ernie::cuda {

namespace {

// The ids a min_tokens ban in force bans for `row`, or none.
std::span<const int32_t> BansOf(const DeviceSampleRow& row) {
  if (row.banned_ids == nullptr || row.position >= static_cast<uint64_t>(row.params->min_tokens)) return {};
  return *row.banned_ids;
}

int32_t NumEdits(const DeviceSampleRow& row) {
  return row.edits == nullptr ? 0 : static_cast<int32_t>(row.edits->edits().size());
}

}  // namespace

absl::Status SampleEditPlan::Build(int32_t first_logit_row, std::span<const DeviceSampleRow> rows) {
  edit_rows_.clear();
  sources_.clear();
  edited_.clear();
  raw_index_.assign(rows.size(), -1);
  num_edits_ = num_bans_ = num_raw_ = 0;
  absl::flat_hash_map<int32_t, const DeviceSampleRow*> owners;  // logits row -> the first row that reads it
  for (const DeviceSampleRow& row : rows) {
    auto [it, first] = owners.try_emplace(row.logit_row, &row);
    if (!first) {
      // An n > 1 fork: its samples read one row, with the same processors.
      const DeviceSampleRow& owner = *it->second;
      if (owner.params != row.params || owner.position != row.position)
        return absl::InvalidArgumentError(absl::StrCat("device sampling: rows of logits row ", row.logit_row,
                                                       " would edit it differently"));
      continue;
    }
    const int32_t edits = NumEdits(row);
    const auto bans = static_cast<int32_t>(BansOf(row).size());
    if (edits == 0 && bans == 0) continue;
    edit_rows_.push_back({.logit_row = row.logit_row - first_logit_row,
                          .first_edit = num_edits_,
                          .num_edits = edits,
                          .first_ban = num_bans_,
                          .num_bans = bans,
                          .params = edits > 0 ? row.edits->params() : LogitEditParams{}});
    sources_.push_back(&row);
    edited_.emplace(row.logit_row, EditedRow{.first_edit = num_edits_, .edits = edits > 0 ? row.edits : nullptr});
    num_edits_ += edits;
    num_bans_ += bans;
  }
  // Logprobs are of the raw logits: rows reading an edited row take the raw
  // pass first, one a logits row (a fork's samples share their row's).
  absl::flat_hash_map<int32_t, int32_t> raw_slots;  // logits row -> its raw-pass slot
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].params->logprobs || !edited_.contains(rows[i].logit_row)) continue;
    const auto [it, added] = raw_slots.try_emplace(rows[i].logit_row, num_raw_);
    num_raw_ += added ? 1 : 0;
    raw_index_[i] = it->second;
  }
  return absl::OkStatus();
}

void SampleEditPlan::CopyEdits(LogitEdit* edits, int32_t* bans) const {
  for (size_t i = 0; i < edit_rows_.size(); ++i) {
    const DeviceSampleRow& source = *sources_[i];
    if (source.edits != nullptr) {
      const auto e = source.edits->edits();
      std::copy(e.begin(), e.end(), edits + edit_rows_[i].first_edit);
    }
    const auto b = BansOf(source);
    std::copy(b.begin(), b.end(), bans + edit_rows_[i].first_ban);
  }
}

float SampleEditPlan::RawLogitOf(const DeviceSampleRow& row, int32_t token, float token_logit,
                                 std::span<const float> originals) const {
  float raw = token_logit;
  const auto it = edited_.find(row.logit_row);
  if (it != edited_.end() && it->second.edits != nullptr)
    if (const int32_t j = it->second.edits->EditIndexOf(token); j >= 0)
      raw = originals[static_cast<size_t>(it->second.first_edit + j)];
  return raw != raw ? -std::numeric_limits<float>::infinity() : raw;
}

}  // namespace ernie::cuda
