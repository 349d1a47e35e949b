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
      device_sampling_(backend->SupportsDeviceSampling()),
      overlap_(config.overlap_steps && device_sampling_ && backend->OverlapsSteps()) {}

EngineCore::~EngineCore() {
  if (!in_flight_ || in_flight_->read) return;
  // The backend's device may still run it and keeps its results queued.
  (void)backend_->WaitForSamples(in_flight_->device_sampled);
}

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
  if (in_flight_) CompleteInFlight();
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
  if (plan.chunks.empty()) {
    if (!in_flight_) return false;
    CompleteInFlight();  // e.g. every running sequence's pending token is its last
    return true;
  }
  std::optional<LaunchedStep> launched = Launch(plan);
  // Overlapped: the device now has step N+1 queued behind step N; read N.
  if (in_flight_) CompleteInFlight();
  if (launched) {
    // Rows with edits need this step's tokens before their next edits exist,
    // so it is read now too (before Abort or AddRequest can run between
    // steps: its rows' edits stay alive for the backend's wait).
    if (launched->read || launched->needs_tokens_to_plan) {
      Complete(*launched);
    } else {
      in_flight_ = std::move(launched);
    }
  }
  return true;
}

void EngineCore::CompleteInFlight() {
  LaunchedStep step = std::move(*in_flight_);
  in_flight_.reset();
  Complete(step);
}

bool EngineCore::ForksNow(const RequestState& req, const SampleSlot& slot) {
  return slot.row.sample_index == 0 && req.sampling.n > 1 && req.samples.size() == 1 && !req.fork_launched;
}

std::optional<EngineCore::LaunchedStep> EngineCore::Launch(const sched::StepPlan& plan) {
  LaunchedStep step;
  step.start = step_time_;
  tokens_.clear();
  positions_.clear();
  logit_rows_.clear();
  slices_.clear();
  fed_back_.clear();
  for (const sched::ScheduledChunk& chunk : plan.chunks) {
    sched::Sequence& seq = *chunk.seq;
    auto [req, slot] = by_sequence_.at(seq.id);
    SequenceSlice slice{.first_token = static_cast<int32_t>(tokens_.size()),
                        .num_new_tokens = chunk.num_new_tokens,
                        .num_cached_tokens = seq.num_computed_tokens,
                        .block_table = {}};
    auto table = kv_->BlockTable(seq.id);
    if (table.ok()) slice.block_table = std::span<const int32_t>(table->data(), table->size());
    for (int32_t j = 0; j < chunk.num_new_tokens; ++j) {
      const int32_t position = seq.num_computed_tokens + j;
      if (position < seq.num_tokens()) {
        tokens_.push_back(seq.tokens[static_cast<size_t>(position)]);
      } else {  // the token the unread step samples for it (only a decode's input)
        fed_back_.push_back({.token_index = static_cast<int32_t>(tokens_.size()), .sample_row = slot->launched_row});
        tokens_.push_back(0);
      }
      positions_.push_back(position);
    }
    LaunchedChunk launched{.seq = seq.id,
                           .prefill_tokens = std::clamp(seq.num_prompt_tokens - seq.num_computed_tokens, 0,
                                                        chunk.num_new_tokens),
                           .preemptions = seq.num_preemptions};
    seq.num_computed_tokens += chunk.num_new_tokens;
    launched.computed_after = seq.num_computed_tokens;
    if (chunk.produces_logits) {
      launched.logit_row = static_cast<int32_t>(logit_rows_.size());
      logit_rows_.push_back(static_cast<int32_t>(tokens_.size()) - 1);
      launched.forks = ForksNow(*req, *slot);
    }
    step.num_prefill_tokens += launched.prefill_tokens;
    slices_.push_back(slice);
    step.chunks.push_back(launched);
  }
  step.num_tokens = static_cast<int32_t>(tokens_.size());
  const StepBatch batch{.token_ids = tokens_, .positions = positions_, .sequences = slices_,
                        .logit_token_indices = logit_rows_, .fed_back_tokens = fed_back_};
  absl::Status status;
  const Clock::time_point model_start = Clock::now();
  if (device_sampling_) {
    PlanDeviceSampling(step);
    step.device_sampled.assign(device_rows_.size(), SampledToken{});
    if (overlap_) {
      status = backend_->LaunchForwardAndSample(batch, {.rows = device_rows_});
    } else {
      status = backend_->ForwardAndSample(batch, {.rows = device_rows_}, step.device_sampled);
      step.read = true;
    }
  } else {
    logits_.resize(logit_rows_.size() * static_cast<size_t>(backend_->vocab_size()));
    status = backend_->Forward(batch, logits_);
    step.read = true;
  }
  step.model_s = std::chrono::duration<double>(Clock::now() - model_start).count();
  if (!status.ok()) {
    std::vector<std::string> ids;
    for (const auto& chunk : plan.chunks) ids.push_back(by_sequence_.at(chunk.seq->id).first->id);
    for (const auto& id : ids)
      if (auto it = requests_.find(id); it != requests_.end()) FailRequest(*it->second, status);
    return std::nullopt;
  }
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    if (step.chunks[i].logit_row < 0) continue;
    ++plan.chunks[i].seq->num_pending_tokens;
    if (step.chunks[i].forks) by_sequence_.at(step.chunks[i].seq).first->fork_launched = true;
  }
  return step;
}

void EngineCore::Complete(LaunchedStep& step) {
  Apply(step);
  ++steps_;
  if (observer_ != nullptr) {
    // Overlapped, a step began (was planned) before the one ahead of it
    // was read: its own time starts there.
    const Clock::time_point now = Clock::now();
    const Clock::time_point from = std::max(step.start, last_read_time_);
    StepStats stats{.num_sequences = static_cast<int32_t>(step.chunks.size()),
                    .num_tokens = step.num_tokens,
                    .num_prefill_tokens = step.num_prefill_tokens,
                    .duration_s = std::chrono::duration<double>(now - from).count(),
                    .model_s = step.model_s};
    observer_->OnStep(stats);
    last_read_time_ = now;
  }
}

void EngineCore::Apply(LaunchedStep& step) {
  absl::Status read = absl::OkStatus();
  if (!step.read) {
    const Clock::time_point wait_start = Clock::now();
    read = backend_->WaitForSamples(step.device_sampled);
    step.model_s += std::chrono::duration<double>(Clock::now() - wait_start).count();
  }
  if (observer_ != nullptr) token_time_ = Clock::now();
  // The step's pending tokens are known now (or lost with a failed step).
  for (const LaunchedChunk& chunk : step.chunks)
    if (auto it = by_sequence_.find(chunk.seq); it != by_sequence_.end() && chunk.logit_row >= 0)
      --it->second.second->seq.num_pending_tokens;
  if (!read.ok()) {
    std::vector<std::string> ids;
    for (const LaunchedChunk& chunk : step.chunks)
      if (auto it = by_sequence_.find(chunk.seq); it != by_sequence_.end()) ids.push_back(it->second.first->id);
    for (const auto& id : ids)
      if (auto it = requests_.find(id); it != requests_.end()) FailRequest(*it->second, read);
    return;
  }

  // Update: record computed KV, then take tokens where logits came out.
  std::vector<SampleSlot*> rows;
  std::vector<int32_t> row_logits;  // which logits row each sampled row reads
  std::vector<RequestState*> touched;
  for (const LaunchedChunk& chunk : step.chunks) {
    auto found = by_sequence_.find(chunk.seq);
    if (found == by_sequence_.end()) continue;  // its request ended after the launch
    auto [req, slot] = found->second;
    if (slot->finished) continue;  // finished after the launch: the row is dropped
    sched::Sequence& seq = slot->seq;
    prompt_tokens_computed_ += chunk.prefill_tokens;
    if (observer_ != nullptr && !req->first_scheduled_time) req->first_scheduled_time = step.start;
    // A sequence preempted since the launch has no KV to commit: it recomputes.
    if (seq.num_preemptions == chunk.preemptions)
      (void)kv_->CommitComputedTokens(seq.id, seq.tokens, std::min(chunk.computed_after, seq.num_tokens()));
    if (chunk.logit_row < 0) continue;
    rows.push_back(slot);
    row_logits.push_back(chunk.logit_row);
    if (chunk.forks) ForkSiblings(*req, chunk.computed_after, rows, row_logits);
    touched.push_back(req);
  }
  if (rows.empty()) return;

  auto sampled = SampleRows(step, rows, row_logits);
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

void EngineCore::PlanDeviceSampling(LaunchedStep& step) {
  device_rows_.clear();
  step.routes.clear();
  for (const LaunchedChunk& chunk : step.chunks) {
    if (chunk.logit_row < 0) continue;
    const auto logit_row = static_cast<int32_t>(step.routes.size());
    const auto [req, slot] = by_sequence_.at(chunk.seq);
    // Its draw's index: the outputs known plus one still unread (overlapped steps).
    const auto position = static_cast<uint64_t>(slot->row.output.num_tokens() + slot->seq.num_pending_tokens);
    LogitRowRoute route{.device_first = static_cast<int32_t>(device_rows_.size()), .forks = chunk.forks};
    const bool banning = position < static_cast<uint64_t>(req->sampling.min_tokens);
    const std::vector<int32_t>* bans = banning ? &req->min_tokens_bans : nullptr;
    const SampleLogitEdits* edits = slot->edits ? &*slot->edits : nullptr;
    // The edits follow the outputs: the next step's edits need this token.
    if (edits != nullptr) step.needs_tokens_to_plan = true;
    slot->launched_row = route.device_first;
    device_rows_.push_back({.logit_row = logit_row, .params = &req->sampling, .seed = req->seed,
                            .sample_index = slot->row.sample_index, .position = position, .banned_ids = bans,
                            .edits = edits});
    // The siblings sample from this row now (the update forks them). A
    // sibling whose fork then fails recomputes its prompt and samples later;
    // its draw here is dropped.
    if (route.forks)
      for (int32_t i = 1; i < req->sampling.n; ++i)
        device_rows_.push_back({.logit_row = logit_row, .params = &req->sampling, .seed = req->seed,
                                .sample_index = static_cast<uint32_t>(i), .position = position, .banned_ids = bans,
                                .edits = edits});  // the parent's: a fork's outputs are empty alike
    step.routes.push_back(route);
  }
}

absl::StatusOr<std::vector<SampledToken>> EngineCore::SampleRows(LaunchedStep& step,
                                                                 const std::vector<SampleSlot*>& rows,
                                                                 const std::vector<int32_t>& row_logits) {
  std::vector<SampledToken> out(rows.size());
  if (device_sampling_) {  // the backend sampled every row (PlanDeviceSampling)
    for (size_t i = 0; i < rows.size(); ++i) {
      const LogitRowRoute& route = step.routes[static_cast<size_t>(row_logits[i])];
      const uint32_t offset = route.forks ? rows[i]->row.sample_index : 0;
      out[i] = std::move(step.device_sampled[static_cast<size_t>(route.device_first) + offset]);
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

void EngineCore::ForkSiblings(RequestState& req, int32_t prompt_computed, std::vector<SampleSlot*>& rows,
                              std::vector<int32_t>& row_logits) {
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
    // A fork runs at once, so it needs room under max_num_seqs like any admission.
    auto forked = scheduler_->HasRunningRoom() ? kv_->ForkSequence(parent.seq.id, child->seq.id)
                                               : absl::StatusOr<std::optional<kv::ForkResult>>(std::nullopt);
    if (forked.ok() && forked->has_value()) {
      // Shares the parent's KV: full blocks by reference, a partial tail by
      // copy. (With overlapped steps the parent may already compute its
      // next token: the prompt is what the child shares.)
      child->seq.num_computed_tokens = prompt_computed;
      if ((*forked)->tail_copy) {
        const auto& c = *(*forked)->tail_copy;
        pending_copies_.push_back({c.src_block, c.dst_block, c.num_tokens});
      }
      scheduler_->AddRunning(&child->seq);
      rows.push_back(child.get());
      row_logits.push_back(parent_row);
    } else {
      // No room to run, no block for the tail right now, or the parent was
      // preempted since the launch: recompute the prompt later (its full
      // blocks come back from the prefix cache). It samples from its own logits.
      scheduler_->AddSibling(&child->seq);
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
