#include "gateway/stream/generation_job.h"

#include <chrono>
#include <mutex>
#include <optional>

#include "absl/strings/str_cat.h"
#include "gateway/http/sse.h"
#include "gateway/stream/choice_decoder.h"
#include "gateway/upstream/generate_call.h"
#include "gateway/upstream/multiplexed_call.h"
#include "gateway/upstream/grpc_status_map.h"

namespace ernie::gateway {
namespace {

bool Retryable(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE ||
         status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
}

class GenerationJob : public std::enable_shared_from_this<GenerationJob> {
 public:
  GenerationJob(GenerationJobSpec spec, const GenerationServices& services, std::shared_ptr<ResponseChannel> channel)
      : spec_(std::move(spec)), services_(services), channel_(std::move(channel)), start_(spec_.arrival) {
    const int n = spec_.params.n;
    for (size_t p = 0; p < spec_.prompts.size(); ++p) {
      Group group;
      group.affinity_key = PrefixAffinityKey(spec_.prompts[p].token_ids);
      groups_.push_back(std::move(group));
      for (int i = 0; i < n; ++i) {
        choices_.push_back(Choice{.decoder = ChoiceDecoder(services_.table, spec_.params.skip_special_tokens,
                                                           spec_.params.stop)});
      }
    }
  }

  void Start() {
    if (services_.metrics != nullptr)
      services_.metrics->ObservePromptReady(std::chrono::duration<double>(Clock::now() - start_).count());
    std::weak_ptr<GenerationJob> weak = weak_from_this();
    channel_->SetOnClosed([weak] {
      if (auto job = weak.lock()) job->OnClientClosed();
    });
    for (size_t g = 0; g < groups_.size(); ++g) StartGroup(g);
  }

 private:
  struct Group {
    std::optional<WorkerPool::Lease> lease;
    std::shared_ptr<UpstreamCall> call;
    std::vector<std::string> tried;  // worker addresses already tried
    uint64_t affinity_key = 0;
    bool received = false;           // a message arrived: no retry any more
    std::chrono::steady_clock::time_point opened;  // when the current call's stream was opened
    bool cancelled = false;          // we ended the call (stop string, failure, client gone)
    bool done = false;               // every choice of the group finished
    int attempt = 0;                 // counts StartGroup calls: a stale call is never stored
    int64_t prompt_tokens = 0;
    int64_t cached_tokens = 0;
  };
  struct Choice {
    ChoiceDecoder decoder;
    bool finished = false;
    std::string finish_reason;
    int64_t completion_tokens = 0;
    std::optional<OutJson> logprobs;  // accumulated (complete response) or per chunk (stream)
    int64_t text_offset = 0;          // completions logprobs text_offset
    std::optional<TextChunkTemplate> text_chunk;  // made on the first text-only chunk
  };

  int n() const { return spec_.params.n; }

  // Picks a worker (outside the ones tried) and opens the stream. Called
  // without the lock: the call's callbacks take it.
  void StartGroup(size_t g) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (ended_) return;
    Group& group = groups_[g];
    const int attempt = ++group.attempt;
    std::optional<WorkerPool::Lease> lease = services_.workers->Acquire(group.affinity_key, group.tried);
    if (!lease) {
      FailLocked(last_error_ ? *last_error_ : ServiceUnavailable("No healthy worker is available"),
                 StreamErrorReason::kNoWorker);
      return;
    }
    group.lease = lease;
    group.tried.push_back(lease->endpoint->address);
    ernie::v1::GenerateRequest request;
    request.set_request_id(absl::StrCat(spec_.header.id, "-", g, "-", group.tried.size()));
    request.mutable_prompt_token_ids()->Assign(spec_.prompts[g].token_ids.begin(), spec_.prompts[g].token_ids.end());
    *request.mutable_sampling() = ToSamplingParams(spec_.params, spec_.defaults, spec_.prompts[g].max_tokens);
    group.opened = Clock::now();
    lock.unlock();

    std::shared_ptr<GenerationJob> self = shared_from_this();
    UpstreamCall::Handlers handlers{
        .on_message = [self, g](UpstreamCall& call, const ernie::v1::GenerateResponse& message) {
          self->OnMessage(g, call, message);
        },
        .on_done = [self, g](const grpc::Status& status) { self->OnDone(g, status); }};
    std::shared_ptr<UpstreamCall> call;
    if (lease->endpoint->multiplexed != nullptr) {
      call = MultiplexedCall::Start(*lease->endpoint->multiplexed, request, std::move(handlers), services_.timeouts);
    } else {
      call = GenerateCall::Start(lease->endpoint->stub.get(), request, spec_.request_id, std::move(handlers),
                                 services_.timeouts);
    }
    lock.lock();
    // The call may have failed and been retried already: then it is not
    // this group's call any more.
    if (group.attempt != attempt) return;
    group.call = call;
    if (ended_ || group.cancelled) call->Cancel();
  }

  void OnMessage(size_t g, UpstreamCall& current, const ernie::v1::GenerateResponse& message) {
    std::unique_lock<std::mutex> lock(mutex_);
    Group& group = groups_[g];
    if (ended_ || group.cancelled) return;
    if (!group.received && services_.metrics != nullptr)
      services_.metrics->ObserveWorkerFirstToken(std::chrono::duration<double>(Clock::now() - group.opened).count());
    group.received = true;
    RecordTokensLocked(message.token_ids_size());
    group.prompt_tokens = message.prompt_tokens();
    group.cached_tokens = message.cached_prompt_tokens();
    if (message.index() < 0 || message.index() >= n()) {
      return FailLocked(InternalError(absl::StrCat("worker sent sample index ", message.index(), " of ", n())),
                        StreamErrorReason::kInvalidWorkerOutput);
    }
    if (spec_.params.stream && !stream_started_) StartStreamLocked();
    const size_t c = g * static_cast<size_t>(n()) + static_cast<size_t>(message.index());
    if (!choices_[c].finished) {
      if (absl::Status status = ConsumeLocked(c, message); !status.ok()) {
        return FailLocked(ApiErrorFromStatus(status, "worker"), StreamErrorReason::kInvalidWorkerOutput);
      }
    }
    bool group_done = true;
    for (int i = 0; i < n(); ++i) group_done = group_done && choices_[g * n() + i].finished;
    if (group_done && !group.done) {
      group.done = true;
      // Finished by a stop string, the worker may still be generating.
      group.cancelled = true;
      current.Cancel();
      MaybeCompleteLocked();
      return;
    }
    // `current`, not group.call: StartGroup may not have stored it yet.
    std::shared_ptr<UpstreamCall> call = current.shared_from_this();
    if (spec_.params.stream && channel_->congested()) {
      // A slow reader: wait for its buffer to drain; the worker coalesces tokens meanwhile.
      channel_->WhenWritable([call] { call->ReadNext(); });
    } else {
      call->ReadNext();
    }
  }

  // Time to first token, then the gap per token, as the client would see them.
  void RecordTokensLocked(int tokens) {
    if (services_.metrics == nullptr || tokens == 0) return;
    const Clock::time_point now = Clock::now();
    if (!last_tokens_) {
      services_.metrics->ObserveFirstToken(std::chrono::duration<double>(now - start_).count());
      if (tokens > 1) services_.metrics->ObserveTokenGap(0, tokens - 1);  // arrived together
    } else {
      services_.metrics->ObserveTokenGap(std::chrono::duration<double>(now - *last_tokens_).count(), tokens);
    }
    last_tokens_ = now;
  }

  void RecordEndLocked() {
    if (services_.metrics != nullptr)
      services_.metrics->ObserveRequestLatency(std::chrono::duration<double>(Clock::now() - start_).count());
  }

  // Turns one message of choice `c` into text (and a chunk when streaming).
  absl::Status ConsumeLocked(size_t c, const ernie::v1::GenerateResponse& message) {
    Choice& choice = choices_[c];
    absl::StatusOr<std::string> delta = choice.decoder.Append(message.token_ids());
    if (!delta.ok()) return delta.status();
    std::string text = *std::move(delta);
    choice.completion_tokens += message.token_ids_size();
    std::optional<OutJson> chunk_logprobs;
    std::optional<OutJson>& logprobs = spec_.params.stream ? chunk_logprobs : choice.logprobs;
    if (spec_.params.logprobs && message.logprobs_size() > 0) {
      if (spec_.header.kind == ApiKind::kChat) {
        AppendChatLogprobs(*services_.table, message.logprobs(), &logprobs);
      } else {
        AppendCompletionLogprobs(*services_.table, message.logprobs(), &choice.text_offset, &logprobs);
      }
    }
    if (choice.decoder.stopped_by_string()) {
      choice.finished = true;
      choice.finish_reason = "stop";
    } else if (message.finish_reason() != ernie::v1::FINISH_REASON_UNSPECIFIED) {
      text += choice.decoder.Finish();
      choice.finished = true;
      choice.finish_reason = choice.decoder.stopped_by_string() ? "stop" : FinishReasonName(message.finish_reason());
    }
    if (spec_.params.stream && !text.empty() && !chunk_logprobs && !choice.finished) {
      // The common case, a token's text alone: from the choice's template.
      if (!choice.text_chunk) choice.text_chunk.emplace(spec_.header, static_cast<int>(c), spec_.params.include_usage);
      channel_->Send(SseEvent(choice.text_chunk->Render(text)));
    } else if (spec_.params.stream && (!text.empty() || chunk_logprobs || choice.finished)) {
      std::optional<std::string> finish;
      if (choice.finished) finish = choice.finish_reason;
      SendLocked(ChoiceChunk(spec_.header, static_cast<int>(c), text, false, chunk_logprobs, finish,
                             spec_.params.include_usage));
    }
    return absl::OkStatus();
  }

  void StartStreamLocked() {
    stream_started_ = true;
    channel_->StartStream(HttpResponse{
        .status = 200, .content_type = std::string(kSseContentType), .headers = {{"Cache-Control", "no-cache"}}});
    for (size_t c = 0; c < choices_.size(); ++c) {
      const std::string echo = spec_.prompts[c / static_cast<size_t>(n())].echo_text;
      if (spec_.header.kind == ApiKind::kChat) {
        SendLocked(ChoiceChunk(spec_.header, static_cast<int>(c), "", true, std::nullopt, std::nullopt,
                               spec_.params.include_usage));
      } else if (!echo.empty()) {
        SendLocked(ChoiceChunk(spec_.header, static_cast<int>(c), echo, false, std::nullopt, std::nullopt,
                               spec_.params.include_usage));
      }
    }
  }

  void SendLocked(const OutJson& chunk) {
    channel_->Send(SseEvent(chunk.dump(-1, ' ', false, OutJson::error_handler_t::replace)));
  }

  void OnDone(size_t g, const grpc::Status& status) {
    bool retry = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      Group& group = groups_[g];
      const bool worker_failed = status.error_code() == grpc::StatusCode::UNAVAILABLE;
      if (group.lease) {
        services_.workers->Release(*group.lease, worker_failed,
                                   status.ok() || group.received ? std::optional<uint64_t>(group.affinity_key)
                                                                 : std::nullopt);
        group.lease.reset();
      }
      group.call.reset();
      if (ended_ || group.cancelled || group.done) return;
      if (status.ok()) {
        // The stream ended without a finish reason for some sample: close them as stopped.
        for (int i = 0; i < n(); ++i) {
          Choice& choice = choices_[g * n() + i];
          if (choice.finished) continue;
          const std::string rest = choice.decoder.Finish();
          choice.finished = true;
          choice.finish_reason = "stop";
          if (spec_.params.stream) {
            SendLocked(ChoiceChunk(spec_.header, g * n() + i, rest, false, std::nullopt, choice.finish_reason,
                                   spec_.params.include_usage));
          }
        }
        group.done = true;
        MaybeCompleteLocked();
        return;
      }
      last_error_ = ApiErrorFromGrpc(status, "worker");
      retry = !group.received && Retryable(status);
      if (services_.metrics != nullptr) {
        services_.metrics->UpstreamError("worker", absl::StatusCodeToString(
                                                       static_cast<absl::StatusCode>(status.error_code())));
        if (retry) services_.metrics->UpstreamRetry();
      }
      if (!retry) return FailLocked(*last_error_, StreamErrorReason::kWorkerFailed);
    }
    StartGroup(g);  // another worker; fails with last_error_ when none is left
  }

  void MaybeCompleteLocked() {
    for (const Group& group : groups_) {
      if (!group.done) return;
    }
    ended_ = true;
    RecordEndLocked();
    UsageCounts usage;
    for (const Group& group : groups_) {
      usage.prompt_tokens += group.prompt_tokens;
      usage.cached_tokens += group.cached_tokens;
    }
    for (const Choice& choice : choices_) usage.completion_tokens += choice.completion_tokens;
    if (spec_.params.stream) {
      if (spec_.params.include_usage) SendLocked(UsageChunk(spec_.header, usage));
      channel_->Send(std::string(kSseDone));
      channel_->End();
      return;
    }
    std::vector<FinishedChoice> finished;
    for (size_t c = 0; c < choices_.size(); ++c) {
      const std::string& echo = spec_.prompts[c / static_cast<size_t>(n())].echo_text;
      finished.push_back(FinishedChoice{.index = static_cast<int>(c),
                                        .text = echo + choices_[c].decoder.text(),
                                        .finish_reason = choices_[c].finish_reason,
                                        .logprobs = choices_[c].logprobs});
    }
    channel_->Respond(HttpResponse{
        .body = CompleteResponse(spec_.header, finished, usage).dump(-1, ' ', false, OutJson::error_handler_t::replace)});
  }

  // Ends the request with `error`: an HTTP error before the stream started,
  // an error event and the end of the stream after. `reason` is counted only
  // for the event: the HTTP errors are in ernie_gateway_requests_total, but a
  // stream already answered 200 and would otherwise fail unseen.
  void FailLocked(const ApiError& error, StreamErrorReason reason) {
    if (ended_) return;
    ended_ = true;
    RecordEndLocked();
    CancelAllLocked();
    if (stream_started_) {
      if (services_.metrics != nullptr) services_.metrics->StreamErrorEvent(reason);
      channel_->Send(SseEvent(error.ToJsonString()));
      channel_->End();
      return;
    }
    HttpResponse response{.status = error.status, .body = error.ToJsonString()};
    if (error.retry_after_seconds) response.headers.emplace_back("Retry-After", absl::StrCat(*error.retry_after_seconds));
    channel_->Respond(std::move(response));
  }

  void OnClientClosed() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!ended_ && services_.metrics != nullptr) services_.metrics->ClientDisconnected();
    ended_ = true;
    CancelAllLocked();
  }

  void CancelAllLocked() {
    for (Group& group : groups_) {
      group.cancelled = true;
      if (group.call) group.call->Cancel();
    }
  }

  using Clock = std::chrono::steady_clock;
  const GenerationJobSpec spec_;
  const GenerationServices services_;
  const std::shared_ptr<ResponseChannel> channel_;
  std::mutex mutex_;  // guards everything below
  std::vector<Group> groups_;    // one per prompt
  std::vector<Choice> choices_;  // prompt * n + sample
  bool stream_started_ = false;
  bool ended_ = false;           // answered (or the client left): later events are dropped
  std::optional<ApiError> last_error_;  // the latest worker failure, for when no retry is left
  const Clock::time_point start_;       // the request's arrival: TTFT and e2e are measured from here
  std::optional<Clock::time_point> last_tokens_;  // when tokens last arrived (any choice)
};

}  // namespace

void StartGenerationJob(GenerationJobSpec spec, const GenerationServices& services,
                        std::shared_ptr<ResponseChannel> channel) {
  auto job = std::make_shared<GenerationJob>(std::move(spec), services, std::move(channel));
  job->Start();
}

}  // namespace ernie::gateway
