#include "engine/backend/instant/instant_backend.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"

namespace ernie {

namespace {

// Waits for `deadline` as a GPU wait does, to within a few microseconds: a
// sleep wakes up tens of microseconds late (timer slack), which would add
// to every paced step, so the last stretch spins.
void WaitUntil(std::chrono::steady_clock::time_point deadline) {
  constexpr auto kSpin = std::chrono::microseconds(100);
  if (std::chrono::steady_clock::now() + kSpin < deadline) std::this_thread::sleep_until(deadline - kSpin);
  while (std::chrono::steady_clock::now() < deadline) {
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<InstantBackend>> InstantBackend::Create(const InstantBackendOptions& o) {
  if (o.vocab_size < 4 || o.block_size < 1 || o.num_blocks < 1 || o.max_tokens_per_step < 1)
    return absl::InvalidArgumentError("instant backend: vocab >= 4, block size, blocks and step tokens >= 1");
  if (o.step_floor.count() < 0 || o.token_cost.count() < 0 || o.logit_row_cost.count() < 0)
    return absl::InvalidArgumentError("instant backend: step floor, token cost and logit row cost must be >= 0");
  ERNIE_ASSIGN_OR_RETURN(HostRowSampler sampler, HostRowSampler::Create(static_cast<int32_t>(o.vocab_size)));
  return std::unique_ptr<InstantBackend>(new InstantBackend(o, std::move(sampler)));
}

InstantBackend::InstantBackend(const InstantBackendOptions& o, HostRowSampler sampler)
    : kv_{.num_layers = 1, .num_kv_heads = 1, .head_dim = 1, .block_size = o.block_size,
          .num_blocks = o.num_blocks, .bytes_per_element = 0},
      vocab_(o.vocab_size),
      max_tokens_(o.max_tokens_per_step),
      step_floor_(o.step_floor),
      token_cost_(o.token_cost),
      logit_row_cost_(o.logit_row_cost),
      sampler_(std::move(sampler)) {}

InstantBackend::Clock::duration InstantBackend::StepCost(const StepBatch& batch) const {
  return step_floor_ + token_cost_ * static_cast<int64_t>(batch.token_ids.size()) +
         logit_row_cost_ * static_cast<int64_t>(batch.logit_token_indices.size());
}

void InstantBackend::FillLogits(const StepBatch& batch, std::span<const int32_t> token_ids,
                                std::span<float> logits) const {
  for (size_t r = 0; r < batch.logit_token_indices.size(); ++r) {
    const auto t = static_cast<size_t>(batch.logit_token_indices[r]);
    float* row = logits.data() + r * static_cast<size_t>(vocab_);
    std::fill(row, row + vocab_, 0.0f);
    row[FavouredToken(token_ids[t], batch.positions[t])] = 8.0f;
  }
}

absl::Status InstantBackend::Forward(const StepBatch& batch, std::span<float> logits) {
  const auto deadline = Clock::now() + StepCost(batch);
  ERNIE_RETURN_IF_ERROR(ValidateStepBatch(batch, kv_, max_tokens_, vocab_, logits));
  FillLogits(batch, batch.token_ids, logits);
  WaitUntil(deadline);  // returns at once when the pace is 0
  return absl::OkStatus();
}

absl::Status InstantBackend::SampleStep(const StepBatch& batch, std::span<const int32_t> token_ids,
                                        const DeviceSamplingRequest& request, std::span<SampledToken> sampled) {
  // A greedy row with nothing to edit, ban or report takes its row's
  // favoured token at once, as a device's greedy kernel would; the rest go
  // through HostRowSampler on the logits (a vocabulary a row of host work
  // that a device would do, so kept to the rows that need it).
  auto needs_sampler = [](const DeviceSampleRow& row) {
    const bool banning = row.position < static_cast<uint64_t>(row.params->min_tokens);
    const bool edited = row.edits != nullptr && !row.edits->edits().empty();
    return !IsGreedy(*row.params) || row.params->logprobs || banning || edited;
  };
  std::vector<DeviceSampleRow> rows;
  std::vector<size_t> where;
  for (size_t i = 0; i < request.rows.size(); ++i) {
    const DeviceSampleRow& row = request.rows[i];
    if (needs_sampler(row)) {
      rows.push_back(row);
      where.push_back(i);
      continue;
    }
    const auto t = static_cast<size_t>(batch.logit_token_indices[static_cast<size_t>(row.logit_row)]);
    sampled[i] = SampledToken{.token_id = FavouredToken(token_ids[t], batch.positions[t])};
  }
  if (rows.empty()) return absl::OkStatus();
  logits_.resize(batch.logit_token_indices.size() * static_cast<size_t>(vocab_));
  FillLogits(batch, token_ids, logits_);
  std::vector<SampledToken> out(rows.size());
  ERNIE_RETURN_IF_ERROR(sampler_.Sample(logits_, rows, out));
  for (size_t k = 0; k < where.size(); ++k) sampled[where[k]] = std::move(out[k]);
  return absl::OkStatus();
}

absl::Status InstantBackend::ForwardAndSample(const StepBatch& batch, const DeviceSamplingRequest& request,
                                              std::span<SampledToken> sampled) {
  const auto deadline = Clock::now() + StepCost(batch);
  ERNIE_RETURN_IF_ERROR(ValidateStepBatchShape(batch, kv_, max_tokens_, vocab_));
  if (!batch.fed_back_tokens.empty())
    return absl::InvalidArgumentError("step batch: fed-back tokens are only for LaunchForwardAndSample");
  ERNIE_RETURN_IF_ERROR(ValidateDeviceSamplingRequest(batch, request, sampled));
  ERNIE_RETURN_IF_ERROR(SampleStep(batch, batch.token_ids, request, sampled));
  WaitUntil(deadline);
  return absl::OkStatus();
}

absl::Status InstantBackend::LaunchForwardAndSample(const StepBatch& batch, const DeviceSamplingRequest& request) {
  ERNIE_RETURN_IF_ERROR(ValidateStepBatchShape(batch, kv_, max_tokens_, vocab_));
  ERNIE_RETURN_IF_ERROR(last_launch_.Validate(batch));
  Launched step;
  step.sampled.resize(request.rows.size());
  ERNIE_RETURN_IF_ERROR(ValidateDeviceSamplingRequest(batch, request, step.sampled));
  ERNIE_RETURN_IF_ERROR(SampleStep(batch, last_launch_.FillIn(batch).token_ids, request, step.sampled));
  // The "device" runs its queue in order: this step starts when the one
  // before ends, or now.
  device_free_ = std::max(device_free_, Clock::now()) + StepCost(batch);
  step.done = device_free_;
  last_launch_.RecordOnHost(step.sampled);
  launched_.push_back(std::move(step));
  return absl::OkStatus();
}

absl::Status InstantBackend::WaitForSamples(std::span<SampledToken> sampled) {
  if (launched_.empty()) return absl::FailedPreconditionError("the instant backend has no launched step to wait for");
  Launched step = std::move(launched_.front());
  launched_.pop_front();
  WaitUntil(step.done);
  return HandOverLaunchedResults(step.sampled, sampled);
}

absl::Status InstantBackend::CopyBlocks(std::span<const BlockCopyOp> copies) {
  return ValidateBlockCopies(copies, kv_);
}

}  // namespace ernie
