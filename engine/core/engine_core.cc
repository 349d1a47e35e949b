#include "engine/core/engine_core.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"

namespace ernie {

std::string_view FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
  }
  return "";
}

absl::StatusOr<std::unique_ptr<EngineCore>> EngineCore::Create(Backend* backend, const EngineConfig& config) {
  const KvCacheShape& shape = backend->kv_shape();
  ERNIE_ASSIGN_OR_RETURN(kv::KvCacheManager kv,
                         kv::KvCacheManager::Create({.num_blocks = static_cast<int32_t>(shape.num_blocks),
                                                     .block_size = static_cast<int32_t>(shape.block_size),
                                                     .enable_prefix_caching = config.enable_prefix_caching}));
  ERNIE_ASSIGN_OR_RETURN(Sampler sampler,
                         Sampler::Create({.vocab_size = static_cast<int32_t>(backend->vocab_size()),
                                          .eos_token_ids = config.eos_token_ids}));
  if (config.max_model_len < 2) return absl::InvalidArgumentError("max_model_len must be at least 2");
  EngineConfig effective = config;
  // No step may carry more tokens than the backend's workspaces hold.
  effective.scheduler.max_num_batched_tokens = static_cast<int32_t>(
      std::min<int64_t>(config.scheduler.max_num_batched_tokens, backend->max_tokens_per_step()));
  return std::unique_ptr<EngineCore>(new EngineCore(backend, effective, std::move(kv), std::move(sampler)));
}

EngineCore::EngineCore(Backend* backend, const EngineConfig& config, kv::KvCacheManager kv, Sampler sampler)
    : backend_(backend),
      config_(config),
      kv_(std::make_unique<kv::KvCacheManager>(std::move(kv))),
      scheduler_(std::make_unique<sched::Scheduler>(config.scheduler, kv_.get())),
      sampler_(std::move(sampler)),
      device_sampling_(backend->SupportsDeviceSampling()) {}

absl::Status EngineCore::AddRequest(EngineRequest request) {
  if (request.request_id.empty()) return absl::InvalidArgumentError("request_id is empty");
  if (requests_.contains(request.request_id))
    return absl::AlreadyExistsError(absl::StrCat("request '", request.request_id, "' is already running"));
  if (request.sink == nullptr) return absl::InvalidArgumentError("request has no output sink");
  const auto& prompt = request.prompt_token_ids;
  if (prompt.empty()) return absl::InvalidArgumentError("prompt_token_ids is empty");
  const int64_t vocab = backend_->vocab_size();
  for (size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || prompt[i] >= vocab)
      return absl::InvalidArgumentError(absl::StrCat("prompt_token_ids[", i, "] = ", prompt[i],
                                                     " is outside the vocabulary of ", vocab));
  const auto prompt_len = static_cast<int64_t>(prompt.size());
  if (prompt_len >= config_.max_model_len)
    return absl::InvalidArgumentError(absl::StrCat("the prompt has ", prompt_len, " tokens; the model's context is ",
                                                   config_.max_model_len));
  ERNIE_RETURN_IF_ERROR(ValidateSamplingParams(request.sampling, vocab, config_.max_model_len, prompt_len));

  auto req = std::make_unique<RequestState>();
  req->id = request.request_id;
  req->sampling = std::move(request.sampling);
  req->sink = std::move(request.sink);
  req->seed = RequestSeed(req->sampling);
  // What a min_tokens ban bans (the host sampler's order: eos ids, then stop ids).
  req->min_tokens_bans = config_.eos_token_ids;
  req->min_tokens_bans.insert(req->min_tokens_bans.end(), req->sampling.stop_token_ids.begin(),
                              req->sampling.stop_token_ids.end());
  if (observer_ != nullptr) req->arrival_time = request.arrival_time.value_or(Clock::now());
  if (req->sampling.repetition_penalty != 1.0f) req->prompt_set = std::make_shared<PromptTokenSet>(prompt);
  auto slot = std::make_unique<SampleSlot>();
  slot->max_tokens = EffectiveMaxTokens(req->sampling, config_.max_model_len, prompt_len);
  slot->seq.id = next_sequence_id_++;
  slot->seq.priority = request.priority;
  slot->seq.arrival = next_arrival_++;
  slot->seq.tokens = std::move(request.prompt_token_ids);
  slot->seq.num_prompt_tokens = static_cast<int32_t>(prompt_len);
  slot->seq.max_total_tokens = static_cast<int32_t>(prompt_len + slot->max_tokens);
  slot->row = SamplerRow{.params = &req->sampling, .seed = req->seed, .sample_index = 0, .prompt_tokens = req->prompt_set};
  StartLogitEdits(*req, *slot);
  ERNIE_RETURN_IF_ERROR(scheduler_->Add(&slot->seq));
  req->num_unfinished = req->sampling.n;  // siblings are counted before they exist
  by_sequence_[slot->seq.id] = {req.get(), slot.get()};
  req->samples.push_back(std::move(slot));
  requests_.emplace(req->id, std::move(req));
  return absl::OkStatus();
}

bool EngineCore::Abort(const std::string& request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return false;
  RequestState& req = *it->second;
  // Samples that were never forked are finished as aborted too.
  while (static_cast<int32_t>(req.samples.size()) < req.sampling.n) {
    auto slot = std::make_unique<SampleSlot>();
    slot->seq.tokens = req.samples[0]->seq.tokens;
    slot->seq.num_prompt_tokens = req.samples[0]->seq.num_prompt_tokens;
    slot->seq.tokens.resize(static_cast<size_t>(slot->seq.num_prompt_tokens));
    slot->seq.status = sched::SequenceStatus::kFinished;
    slot->row.sample_index = static_cast<uint32_t>(req.samples.size());
    req.samples.push_back(std::move(slot));
  }
  for (auto& slot : req.samples)
    if (!slot->finished) FinishSlot(req, *slot, FinishReason::kAbort);
  Deliver(req);
  EraseIfDone(request_id);
  return true;
}

void EngineCore::AbortAll() {
  std::vector<std::string> ids;
  for (const auto& [id, req] : requests_) ids.push_back(id);
  for (const auto& id : ids) Abort(id);
}

bool EngineCore::Step() {
  if (observer_ != nullptr) step_time_ = Clock::now();
  if (!pending_copies_.empty()) {
    // A failed copy means a bad block id: a bug, never user input. The forked
    // samples would read garbage, so their requests fail rather than lie.
    if (absl::Status s = backend_->CopyBlocks(pending_copies_); !s.ok()) {
      std::vector<std::string> ids;
      for (auto& [id, req] : requests_) ids.push_back(id);
      for (const auto& id : ids) FailRequest(*requests_.at(id), s);
    }
    pending_copies_.clear();
  }
  sched::StepPlan plan = scheduler_->Schedule();
  if (plan.chunks.empty()) return false;
  Execute(plan);
  ++steps_;
  if (observer_ != nullptr) {
    StepStats step{.num_sequences = static_cast<int32_t>(plan.chunks.size()),
                   .num_tokens = static_cast<int32_t>(tokens_.size()),
                   .num_prefill_tokens = step_prefill_tokens_,
                   .duration_s = std::chrono::duration<double>(Clock::now() - step_time_).count(),
                   .model_s = step_model_s_};
    observer_->OnStep(step);
  }
  return true;
}

void EngineCore::Execute(const sched::StepPlan& plan) {
  step_prefill_tokens_ = 0;
  tokens_.clear();
  positions_.clear();
  logit_rows_.clear();
  slices_.clear();
  for (const sched::ScheduledChunk& chunk : plan.chunks) {
    const sched::Sequence& seq = *chunk.seq;
    SequenceSlice slice{.first_token = static_cast<int32_t>(tokens_.size()),
                        .num_new_tokens = chunk.num_new_tokens,
                        .num_cached_tokens = seq.num_computed_tokens,
                        .block_table = {}};
    auto table = kv_->BlockTable(seq.id);
    if (table.ok()) slice.block_table = std::span<const int32_t>(table->data(), table->size());
    for (int32_t j = 0; j < chunk.num_new_tokens; ++j) {
      tokens_.push_back(seq.tokens[static_cast<size_t>(seq.num_computed_tokens + j)]);
      positions_.push_back(seq.num_computed_tokens + j);
    }
    if (chunk.produces_logits) logit_rows_.push_back(static_cast<int32_t>(tokens_.size()) - 1);
    slices_.push_back(slice);
  }
  const auto vocab = static_cast<size_t>(backend_->vocab_size());
  const StepBatch batch{.token_ids = tokens_, .positions = positions_, .sequences = slices_,
                        .logit_token_indices = logit_rows_};
  absl::Status forward;
  Clock::time_point model_start;  // around the backend call alone (StepStats::model_s)
  if (device_sampling_) {
    PlanDeviceSampling(plan);
    device_sampled_.assign(device_rows_.size(), SampledToken{});
    model_start = Clock::now();
    forward = backend_->ForwardAndSample(batch, {.rows = device_rows_}, device_sampled_);
  } else {
    logits_.resize(logit_rows_.size() * vocab);
    model_start = Clock::now();
    forward = backend_->Forward(batch, logits_);
  }
  step_model_s_ = std::chrono::duration<double>(Clock::now() - model_start).count();
  if (absl::Status s = forward; !s.ok()) {
    std::vector<std::string> ids;
    for (const auto& chunk : plan.chunks) ids.push_back(by_sequence_.at(chunk.seq->id).first->id);
    for (const auto& id : ids)
      if (auto it = requests_.find(id); it != requests_.end()) FailRequest(*it->second, s);
    return;
  }

  // Update: record computed KV, then sample where logits came out.
  std::vector<SampleSlot*> rows;
  std::vector<int32_t> row_logits;  // which logits row each sampled row reads
  std::vector<RequestState*> touched;
  int32_t logits_row = 0;
  for (const sched::ScheduledChunk& chunk : plan.chunks) {
    sched::Sequence& seq = *chunk.seq;
    if (seq.num_computed_tokens < seq.num_prompt_tokens) {
      const int32_t prefill = std::min(chunk.num_new_tokens, seq.num_prompt_tokens - seq.num_computed_tokens);
      prompt_tokens_computed_ += prefill;
      step_prefill_tokens_ += prefill;
    }
    if (observer_ != nullptr) {
      RequestState& owner = *by_sequence_.at(seq.id).first;
      if (!owner.first_scheduled_time) owner.first_scheduled_time = step_time_;
    }
    seq.num_computed_tokens += chunk.num_new_tokens;
    (void)kv_->CommitComputedTokens(seq.id, seq.tokens, seq.num_computed_tokens);
    if (!chunk.produces_logits) continue;
    auto [req, slot] = by_sequence_.at(seq.id);
    rows.push_back(slot);
    row_logits.push_back(logits_row);
    if (slot->row.sample_index == 0 && req->sampling.n > 1 && req->samples.size() == 1)
      ForkSiblings(*req, rows, row_logits);
    ++logits_row;
    touched.push_back(req);
  }
  if (rows.empty()) return;

  auto sampled = SampleRows(rows, row_logits);
  if (observer_ != nullptr) token_time_ = Clock::now();
  if (!sampled.ok()) {
    for (RequestState* req : touched)
      if (requests_.contains(req->id)) FailRequest(*req, sampled.status());
    return;
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    RequestState& req = *by_sequence_.at(rows[i]->seq.id).first;
    AppendToken(req, *rows[i], (*sampled)[i]);
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  std::vector<std::string> ids;
  for (RequestState* req : touched) {
    Deliver(*req);
    ids.push_back(req->id);
  }
  for (const auto& id : ids) EraseIfDone(id);
}

void EngineCore::StartLogitEdits(const RequestState& req, SampleSlot& slot) const {
  if (!device_sampling_ || !HasLogitEdits(req.sampling)) return;
  slot.edits.emplace(req.sampling, req.prompt_set.get(), static_cast<int32_t>(backend_->vocab_size()));
}

void EngineCore::PlanDeviceSampling(const sched::StepPlan& plan) {
  device_rows_.clear();
  routes_.clear();
  for (const sched::ScheduledChunk& chunk : plan.chunks) {
    if (!chunk.produces_logits) continue;
    const auto logit_row = static_cast<int32_t>(routes_.size());
    const auto [req, slot] = by_sequence_.at(chunk.seq->id);
    const auto position = static_cast<uint64_t>(slot->row.output.num_tokens());
    LogitRowRoute route{.device_first = static_cast<int32_t>(device_rows_.size())};
    const bool banning = slot->row.output.num_tokens() < req->sampling.min_tokens;
    const std::vector<int32_t>* bans = banning ? &req->min_tokens_bans : nullptr;
    const SampleLogitEdits* edits = slot->edits ? &*slot->edits : nullptr;
    device_rows_.push_back({.logit_row = logit_row, .params = &req->sampling, .seed = req->seed,
                            .sample_index = slot->row.sample_index, .position = position, .banned_ids = bans,
                            .edits = edits});
    // The same condition as the update's fork: siblings sample from this
    // row now. A sibling whose fork then fails recomputes its prompt and
    // samples later; its draw here is dropped.
    route.forks = slot->row.sample_index == 0 && req->sampling.n > 1 && req->samples.size() == 1;
    if (route.forks)
      for (int32_t i = 1; i < req->sampling.n; ++i)
        device_rows_.push_back({.logit_row = logit_row, .params = &req->sampling, .seed = req->seed,
                                .sample_index = static_cast<uint32_t>(i), .position = position, .banned_ids = bans,
                                .edits = edits});  // the parent's: a fork's outputs are empty alike
    routes_.push_back(route);
  }
}

absl::StatusOr<std::vector<SampledToken>> EngineCore::SampleRows(const std::vector<SampleSlot*>& rows,
                                                                 const std::vector<int32_t>& row_logits) {
  std::vector<SampledToken> out(rows.size());
  if (device_sampling_) {  // the backend sampled every row (PlanDeviceSampling)
    for (size_t i = 0; i < rows.size(); ++i) {
      const LogitRowRoute& route = routes_[static_cast<size_t>(row_logits[i])];
      const uint32_t offset = route.forks ? rows[i]->row.sample_index : 0;
      out[i] = std::move(device_sampled_[static_cast<size_t>(route.device_first) + offset]);
    }
    return out;
  }

  // Siblings share their parent's logits row: lay rows out one per sample.
  const auto vocab = static_cast<size_t>(backend_->vocab_size());
  std::span<float> sample_logits(logits_);
  std::vector<float> expanded;
  if (rows.size() * vocab != logits_.size()) {
    expanded.resize(rows.size() * vocab);
    for (size_t k = 0; k < rows.size(); ++k)
      std::copy_n(logits_.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(row_logits[k]) * vocab), vocab,
                  expanded.begin() + static_cast<ptrdiff_t>(k * vocab));
    sample_logits = expanded;
  }
  std::vector<const SamplerRow*> sampler_rows;
  sampler_rows.reserve(rows.size());
  for (SampleSlot* slot : rows) sampler_rows.push_back(&slot->row);
  ERNIE_ASSIGN_OR_RETURN(out, sampler_.Sample(sample_logits, sampler_rows));
  return out;
}

void EngineCore::ForkSiblings(RequestState& req, std::vector<SampleSlot*>& rows, std::vector<int32_t>& row_logits) {
  SampleSlot& parent = *req.samples[0];
  const int32_t parent_row = row_logits.back();
  for (int32_t i = 1; i < req.sampling.n; ++i) {
    auto child = std::make_unique<SampleSlot>();
    child->max_tokens = parent.max_tokens;
    child->seq.id = next_sequence_id_++;
    child->seq.priority = parent.seq.priority;
    child->seq.arrival = parent.seq.arrival;
    child->seq.tokens = parent.seq.tokens;  // the prompt: the parent has not appended yet
    child->seq.num_prompt_tokens = parent.seq.num_prompt_tokens;
    child->seq.max_total_tokens = parent.seq.max_total_tokens;
    child->seq.num_cached_prompt_tokens = parent.seq.num_cached_prompt_tokens;
    child->row = SamplerRow{.params = &req.sampling, .seed = req.seed, .sample_index = static_cast<uint32_t>(i),
                            .prompt_tokens = req.prompt_set};
    StartLogitEdits(req, *child);
    by_sequence_[child->seq.id] = {&req, child.get()};
    auto forked = kv_->ForkSequence(parent.seq.id, child->seq.id);
    if (forked.ok() && forked->has_value()) {
      // Shares the parent's KV: full blocks by reference, a partial tail by copy.
      child->seq.num_computed_tokens = parent.seq.num_computed_tokens;
      if ((*forked)->tail_copy) {
        const auto& c = *(*forked)->tail_copy;
        pending_copies_.push_back({c.src_block, c.dst_block, c.num_tokens});
      }
      scheduler_->AddRunning(&child->seq);
      rows.push_back(child.get());
      row_logits.push_back(parent_row);
    } else {
      // No block for the tail right now: recompute the prompt later (its full
      // blocks come back from the prefix cache). It samples from its own logits.
      (void)scheduler_->Add(&child->seq);
    }
    req.samples.push_back(std::move(child));
  }
}

void EngineCore::AppendToken(RequestState& req, SampleSlot& slot, const SampledToken& token) {
  slot.seq.tokens.push_back(token.token_id);
  slot.row.output.Add(token.token_id);
  if (slot.edits) slot.edits->AddOutputToken(token.token_id);
  slot.pending_tokens.push_back(token.token_id);
  if (req.sampling.logprobs) slot.pending_logprobs.push_back(token);
  ++generated_tokens_;
  if (observer_ != nullptr) {
    if (!slot.first_token_time) {
      slot.first_token_time = token_time_;
      observer_->OnFirstToken(std::chrono::duration<double>(token_time_ - req.arrival_time).count(),
                              slot.seq.num_prompt_tokens);
    } else {
      observer_->OnInterTokenGap(std::chrono::duration<double>(token_time_ - *slot.last_token_time).count());
    }
    slot.last_token_time = token_time_;
  }
  const int64_t outputs = slot.seq.num_output_tokens();
  const auto& eos = config_.eos_token_ids;
  const auto& stops = req.sampling.stop_token_ids;
  const bool can_stop = outputs >= req.sampling.min_tokens;
  if (can_stop && !req.sampling.ignore_eos && std::find(eos.begin(), eos.end(), token.token_id) != eos.end()) {
    slot.stop_token = token.token_id;
    FinishSlot(req, slot, FinishReason::kStop);
  } else if (can_stop && std::find(stops.begin(), stops.end(), token.token_id) != stops.end()) {
    slot.stop_token = token.token_id;
    FinishSlot(req, slot, FinishReason::kStop);
  } else if (outputs >= slot.max_tokens || slot.seq.num_tokens() >= config_.max_model_len) {
    FinishSlot(req, slot, FinishReason::kLength);
  }
}

void EngineCore::FinishSlot(RequestState& req, SampleSlot& slot, FinishReason reason) {
  if (slot.finished) return;
  if (slot.seq.status != sched::SequenceStatus::kFinished) scheduler_->Remove(&slot.seq);
  slot.finished = true;
  slot.finish = reason;
  --req.num_unfinished;
  if (observer_ != nullptr) ReportFinished(req, slot, reason, /*failed=*/false);
}

void EngineCore::ReportFinished(const RequestState& req, const SampleSlot& slot, FinishReason reason, bool failed) {
  const Clock::time_point now = Clock::now();
  auto seconds = [](Clock::time_point from, Clock::time_point to) {
    return std::max(0.0, std::chrono::duration<double>(to - from).count());
  };
  FinishedSampleStats stats{.finish_reason = reason,
                            .failed = failed,
                            .prompt_tokens = slot.seq.num_prompt_tokens,
                            .generation_tokens = slot.seq.num_output_tokens(),
                            .scheduled = req.first_scheduled_time.has_value(),
                            .produced_tokens = slot.first_token_time.has_value(),
                            .e2e_s = seconds(req.arrival_time, now)};
  if (req.first_scheduled_time) {
    stats.queue_s = seconds(req.arrival_time, *req.first_scheduled_time);
    stats.inference_s = seconds(*req.first_scheduled_time, now);
    if (slot.first_token_time) {
      stats.prefill_s = seconds(*req.first_scheduled_time, *slot.first_token_time);
      stats.decode_s = seconds(*slot.first_token_time, *slot.last_token_time);
    }
  } else {
    stats.queue_s = stats.e2e_s;  // never left the queue
  }
  observer_->OnSampleFinished(stats);
}

void EngineCore::Deliver(RequestState& req) {
  for (auto& slot_ptr : req.samples) {
    SampleSlot& slot = *slot_ptr;
    const bool final_now = slot.finished && slot.finish != FinishReason::kNone;
    if (slot.pending_tokens.empty() && !final_now) continue;
    SampleOutput out;
    out.index = static_cast<int32_t>(slot.row.sample_index);
    out.token_ids = std::move(slot.pending_tokens);
    out.logprobs = std::move(slot.pending_logprobs);
    out.prompt_tokens = slot.seq.num_prompt_tokens;
    out.completion_tokens = slot.seq.num_output_tokens();
    out.cached_prompt_tokens = std::max(0, slot.seq.num_cached_prompt_tokens);
    out.finish_reason = slot.finish;
    out.stop_token_id = slot.stop_token;
    slot.pending_tokens.clear();
    slot.pending_logprobs.clear();
    if (final_now) slot.finish = FinishReason::kNone;  // delivered: never again
    req.sink->OnOutput(out);
  }
}

void EngineCore::FailRequest(RequestState& req, const absl::Status& status) {
  for (auto& slot : req.samples) {
    if (slot->seq.status != sched::SequenceStatus::kFinished) scheduler_->Remove(&slot->seq);
    if (observer_ != nullptr && !slot->finished) ReportFinished(req, *slot, FinishReason::kAbort, /*failed=*/true);
    slot->finished = true;
  }
  req.num_unfinished = 0;
  req.sink->OnError(status);
  for (auto& slot : req.samples) by_sequence_.erase(slot->seq.id);
  requests_.erase(req.id);
}

void EngineCore::EraseIfDone(const std::string& id) {
  auto it = requests_.find(id);
  if (it == requests_.end() || it->second->num_unfinished > 0) return;
  for (auto& slot : it->second->samples) by_sequence_.erase(slot->seq.id);
  requests_.erase(it);
}

EngineLoad EngineCore::Load() const {
  const auto stats = kv_->stats();
  return {.running = scheduler_->num_running(),
          .waiting = scheduler_->num_waiting(),
          .kv_blocks_used = kv_->num_blocks() - kv_->num_free_blocks(),
          .kv_blocks_total = kv_->num_blocks(),
          .kv_blocks_free = kv_->num_free_blocks(),
          .prefix_queried_tokens = stats.num_queried_tokens,
          .prefix_hit_tokens = stats.num_hit_tokens,
          .preemptions = scheduler_->num_preemptions(),
          .steps = steps_,
          .generated_tokens = generated_tokens_,
          .prompt_tokens_computed = prompt_tokens_computed_,
          .backend_steps = backend_->step_counters()};
}

}  // namespace ernie
