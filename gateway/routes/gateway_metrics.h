// The gateway's Prometheus metrics, on the in-tree library: HTTP requests by
// route and status, requests and streams in flight, client disconnects,
// upstream errors and retries, streams ended by an error event, time to first
// token (and its tokenization and worker parts) / inter-token latency /
// end-to-end latency as the client sees them,
// drain state, and the process metrics. Thread-safe; updates are atomics (a request's route/status series
// is looked up once per request, never per token).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "services/common/metrics/registry.h"

namespace ernie::gateway {

// Why a stream that had already answered 200 ended with an error event in
// place of [DONE] (the client sees a truncated answer; the HTTP status
// counted in ernie_gateway_requests_total is still 200). The reason label of
// ernie_gateway_stream_error_events_total.
enum class StreamErrorReason {
  kWorkerFailed,         // a worker's call failed after tokens were streamed (no retry then)
  kNoWorker,             // no healthy worker was left for one of the prompts
  kInvalidWorkerOutput,  // a worker message the gateway cannot use (sample index out of range,
                         // tokens the detokenizer refuses)
};
inline constexpr int kStreamErrorReasonCount = 3;

class GatewayMetrics {
 public:
  GatewayMetrics();  // no model_name label (unit tests)
  // Every series carries model_name="<served model name>".
  explicit GatewayMetrics(const std::string& model_name);

  void CountRequest(const std::string& route, int status);
  void StreamStarted() { streams_in_flight_->Add(1); }
  void StreamEnded() { streams_in_flight_->Add(-1); }
  void RequestStarted() { requests_in_flight_->Add(1); }
  void RequestEnded() { requests_in_flight_->Add(-1); }

  // A client closed its connection before its generation ended.
  void ClientDisconnected() { client_disconnects_->Increment(); }
  // An upstream call failed: `service` is "worker" or "tokenizer", `code` the gRPC code name.
  void UpstreamError(const std::string& service, const std::string& code);
  // A generation was retried on another worker.
  void UpstreamRetry() { retries_->Increment(); }
  // An error event was sent to a streaming client (its stream then ends).
  void StreamErrorEvent(StreamErrorReason reason) { stream_errors_[static_cast<size_t>(reason)]->Increment(); }
  // Streaming latencies, measured from the request's arrival at the gateway.
  void ObserveFirstToken(double seconds) { ttft_->Observe(seconds); }
  // The two parts of the time to first token outside the HTTP write: the
  // prompt's token ids ready (chat template and tokenization) after the
  // request's arrival, and a worker's first tokens after its stream opened
  // (the worker's queue and prefill, plus both gRPC hops).
  void ObservePromptReady(double seconds) { prompt_ready_->Observe(seconds); }
  void ObserveWorkerFirstToken(double seconds) { worker_first_token_->Observe(seconds); }
  // `tokens` tokens arrived `seconds` after the previous ones: each gets seconds / tokens.
  void ObserveTokenGap(double seconds, int64_t tokens);
  void ObserveRequestLatency(double seconds) { e2e_->Observe(seconds); }
  void SetDraining(bool draining) { draining_->Set(draining ? 1 : 0); }

  int64_t streams_in_flight() const { return static_cast<int64_t>(streams_in_flight_->value()); }
  int64_t requests_in_flight() const { return static_cast<int64_t>(requests_in_flight_->value()); }
  int64_t requests(const std::string& route, int status) const;
  int64_t stream_error_events(StreamErrorReason reason) const {
    return static_cast<int64_t>(stream_errors_[static_cast<size_t>(reason)]->value());
  }

  // Text format 0.0.4 with HELP and TYPE lines.
  std::string Exposition() const { return registry_.Exposition(); }

 private:
  void Register(const std::string& model_name);

  metrics::Registry registry_;
  // All owned by registry_ (stable for its life).
  metrics::Family<metrics::Counter, 2>* requests_ = nullptr;
  metrics::Family<metrics::Counter, 2>* upstream_errors_ = nullptr;
  metrics::Gauge* streams_in_flight_ = nullptr;
  metrics::Gauge* requests_in_flight_ = nullptr;
  metrics::Counter* client_disconnects_ = nullptr;
  metrics::Counter* retries_ = nullptr;
  // Indexed by StreamErrorReason: every series exists (at 0) from the start.
  std::array<metrics::Counter*, kStreamErrorReasonCount> stream_errors_{};
  metrics::Histogram* ttft_ = nullptr;
  metrics::Histogram* prompt_ready_ = nullptr;
  metrics::Histogram* worker_first_token_ = nullptr;
  metrics::Histogram* itl_ = nullptr;
  metrics::Histogram* e2e_ = nullptr;
  metrics::Gauge* draining_ = nullptr;
};

}  // namespace ernie::gateway
