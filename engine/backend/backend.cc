#include "engine/backend/backend.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/sample/logit_edit.h"
#include "engine/util/status_macros.h"

namespace ernie {

absl::Status Backend::ForwardAndSample(const StepBatch&, const DeviceSamplingRequest&, std::span<SampledToken>) {
  return absl::UnimplementedError(absl::StrCat("the ", std::string(name()), " backend does not sample on its device"));
}

absl::Status Backend::LaunchForwardAndSample(const StepBatch& batch, const DeviceSamplingRequest& request) {
  if (!SupportsDeviceSampling()) return ForwardAndSample(batch, request, {});  // its Unimplemented
  ERNIE_RETURN_IF_ERROR(last_launch_.Validate(batch));
  // The previous launch already ran: its tokens are known here.
  std::vector<SampledToken> sampled(request.rows.size());
  ERNIE_RETURN_IF_ERROR(ForwardAndSample(last_launch_.FillIn(batch), request, sampled));
  last_launch_.RecordOnHost(sampled);
  launched_results_.push_back(std::move(sampled));
  return absl::OkStatus();
}

absl::Status Backend::WaitForSamples(std::span<SampledToken> sampled) {
  if (launched_results_.empty())
    return absl::FailedPreconditionError(
        absl::StrCat("the ", std::string(name()), " backend has no launched step to wait for"));
  std::vector<SampledToken> results = std::move(launched_results_.front());
  launched_results_.pop_front();
  return HandOverLaunchedResults(results, sampled);
}

absl::Status HandOverLaunchedResults(std::vector<SampledToken>& results, std::span<SampledToken> out) {
  if (results.size() != out.size())
    return absl::InvalidArgumentError(absl::StrCat("the launched step sampled ", results.size(),
                                                   " rows; the wait has room for ", out.size()));
  std::move(results.begin(), results.end(), out.begin());
  return absl::OkStatus();
}

void LaunchedTokens::RecordOnHost(std::span<const SampledToken> sampled) {
  rows_ = static_cast<int64_t>(sampled.size());
  on_device_ = false;
  tokens_.clear();
  for (const SampledToken& t : sampled) tokens_.push_back(t.token_id);
}

void LaunchedTokens::RecordOnDevice(int64_t rows) {
  rows_ = rows;
  on_device_ = true;
  tokens_.clear();
}

StepBatch LaunchedTokens::FillIn(const StepBatch& batch) {
  StepBatch run = batch;
  if (batch.fed_back_tokens.empty() || on_device_) return run;
  filled_.assign(batch.token_ids.begin(), batch.token_ids.end());
  for (const FedBackToken& fed : batch.fed_back_tokens)
    filled_[static_cast<size_t>(fed.token_index)] = tokens_[static_cast<size_t>(fed.sample_row)];
  run.token_ids = filled_;
  run.fed_back_tokens = {};
  return run;
}

absl::Status LaunchedTokens::Validate(const StepBatch& b) const {
  int64_t last_index = -1;
  for (size_t i = 0; i < b.fed_back_tokens.size(); ++i) {
    const FedBackToken& fed = b.fed_back_tokens[i];
    if (fed.token_index <= last_index || fed.token_index >= static_cast<int64_t>(b.token_ids.size()))
      return absl::InvalidArgumentError(absl::StrCat("fed-back token ", i, " names token ", fed.token_index,
                                                     " (out of range or out of order)"));
    last_index = fed.token_index;
    if (rows_ < 0)
      return absl::InvalidArgumentError(absl::StrCat("fed-back token ", i, " but no step was launched before"));
    if (fed.sample_row < 0 || fed.sample_row >= rows_)
      return absl::InvalidArgumentError(absl::StrCat("fed-back token ", i, " reads sample row ", fed.sample_row,
                                                     " of the previous launch's ", rows_));
  }
  return absl::OkStatus();
}

absl::Status ValidateStepBatch(const StepBatch& b, const KvCacheShape& kv, int64_t max_tokens, int64_t vocab,
                               std::span<const float> logits) {
  ERNIE_RETURN_IF_ERROR(ValidateStepBatchShape(b, kv, max_tokens, vocab));
  if (!b.fed_back_tokens.empty())
    return absl::InvalidArgumentError("step batch: fed-back tokens are only for LaunchForwardAndSample");
  if (static_cast<int64_t>(logits.size()) < static_cast<int64_t>(b.logit_token_indices.size()) * vocab)
    return absl::InvalidArgumentError("logits buffer is too small");
  return absl::OkStatus();
}

absl::Status ValidateDeviceSamplingRequest(const StepBatch& b, const DeviceSamplingRequest& r,
                                           std::span<const SampledToken> sampled) {
  const auto logit_rows = static_cast<int64_t>(b.logit_token_indices.size());
  if (sampled.size() != r.rows.size())
    return absl::InvalidArgumentError(absl::StrCat("device sampling: ", r.rows.size(), " rows but room for ",
                                                   sampled.size(), " results"));
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const DeviceSampleRow& row = r.rows[i];
    if (row.params == nullptr)
      return absl::InvalidArgumentError(absl::StrCat("device sampling: row ", i, " has no sampling params"));
    if (row.logit_row < 0 || row.logit_row >= logit_rows)
      return absl::InvalidArgumentError(absl::StrCat("device sampling: row ", i, " reads logits row ", row.logit_row,
                                                     " of ", logit_rows));
    if (row.params->top_logprobs < 0 || row.params->top_logprobs > kMaxTopLogprobs)
      return absl::InvalidArgumentError(absl::StrCat("device sampling: row ", i, " asks for ",
                                                     row.params->top_logprobs, " top_logprobs, more than ",
                                                     kMaxTopLogprobs));
    if (row.position < static_cast<uint64_t>(row.params->min_tokens) && row.banned_ids == nullptr)
      return absl::InvalidArgumentError(absl::StrCat("device sampling: row ", i,
                                                     " is under a min_tokens ban but has no banned ids"));
    if (HasLogitEdits(*row.params) &&
        (row.edits == nullptr || row.edits->num_output_tokens() != static_cast<int64_t>(row.position)))
      return absl::InvalidArgumentError(absl::StrCat("device sampling: row ", i,
                                                     " has logit_bias or penalties but not its current edits"));
  }
  return absl::OkStatus();
}

absl::Status ValidateStepBatchShape(const StepBatch& b, const KvCacheShape& kv, int64_t max_tokens, int64_t vocab) {
  const int64_t n = static_cast<int64_t>(b.token_ids.size());
  if (n == 0) return absl::InvalidArgumentError("step batch has no tokens");
  if (n > max_tokens)
    return absl::InvalidArgumentError(absl::StrCat("step batch has ", n, " tokens; the backend was sized for ", max_tokens));
  if (b.positions.size() != b.token_ids.size())
    return absl::InvalidArgumentError("step batch: positions and token_ids differ in length");
  int64_t next = 0;
  for (size_t s = 0; s < b.sequences.size(); ++s) {
    const SequenceSlice& seq = b.sequences[s];
    if (seq.first_token != next || seq.num_new_tokens <= 0 || seq.num_cached_tokens < 0)
      return absl::InvalidArgumentError(absl::StrCat("step batch: sequence ", s, " does not continue the token list"));
    next += seq.num_new_tokens;
    if (next > n) return absl::InvalidArgumentError(absl::StrCat("step batch: sequence ", s, " runs past the tokens"));
    const int64_t total = int64_t{seq.num_cached_tokens} + seq.num_new_tokens;
    if (static_cast<int64_t>(seq.block_table.size()) * kv.block_size < total)
      return absl::InvalidArgumentError(absl::StrCat("step batch: sequence ", s, " needs ", total,
                                                     " token slots but its block table covers ",
                                                     seq.block_table.size() * kv.block_size));
    for (int32_t block : seq.block_table)
      if (block < 0 || block >= kv.num_blocks)
        return absl::InvalidArgumentError(absl::StrCat("step batch: block id ", block, " outside the pool of ",
                                                       kv.num_blocks));
    for (int32_t j = 0; j < seq.num_new_tokens; ++j)
      if (b.positions[static_cast<size_t>(seq.first_token + j)] != seq.num_cached_tokens + j)
        return absl::InvalidArgumentError(absl::StrCat("step batch: sequence ", s, " has a position out of order"));
  }
  if (next != n) return absl::InvalidArgumentError("step batch: sequences do not cover every token");
  for (int32_t id : b.token_ids)
    if (id < 0 || id >= vocab)
      return absl::InvalidArgumentError(absl::StrCat("token id ", id, " outside the vocabulary of ", vocab));
  for (int32_t idx : b.logit_token_indices)
    if (idx < 0 || idx >= n) return absl::InvalidArgumentError(absl::StrCat("logit row ", idx, " is not a token of the batch"));
  return absl::OkStatus();
}

absl::Status ValidateBlockCopies(std::span<const BlockCopyOp> copies, const KvCacheShape& kv) {
  for (const BlockCopyOp& c : copies) {
    if (c.src_block < 0 || c.src_block >= kv.num_blocks || c.dst_block < 0 || c.dst_block >= kv.num_blocks)
      return absl::InvalidArgumentError(absl::StrCat("block copy ", c.src_block, " -> ", c.dst_block,
                                                     " outside the pool of ", kv.num_blocks));
    if (c.num_tokens < 0 || c.num_tokens > kv.block_size)
      return absl::InvalidArgumentError(absl::StrCat("block copy of ", c.num_tokens, " rows; blocks hold ", kv.block_size));
  }
  return absl::OkStatus();
}

}  // namespace ernie
