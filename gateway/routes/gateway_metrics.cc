#include "gateway/routes/gateway_metrics.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "services/common/metrics/process_metrics.h"
#include "services/common/metrics/standard_buckets.h"

namespace ernie::gateway {
namespace {

// The names are constants of this file: a failure is a bug caught by the
// first test run, so it stops the process with the reason.
template <typename T>
T Must(absl::StatusOr<T> value) {
  if (!value.ok()) {
    std::fprintf(stderr, "ernie-gateway: metrics: %s\n", std::string(value.status().message()).c_str());
    std::abort();
  }
  return *value;
}
void MustOk(const absl::Status& status) {
  if (!status.ok()) {
    std::fprintf(stderr, "ernie-gateway: metrics: %s\n", std::string(status.message()).c_str());
    std::abort();
  }
}

}  // namespace

GatewayMetrics::GatewayMetrics() { Register(""); }

GatewayMetrics::GatewayMetrics(const std::string& model_name) { Register(model_name); }

void GatewayMetrics::Register(const std::string& model_name) {
  if (!model_name.empty()) MustOk(registry_.AddConstantLabel("model_name", model_name));
  requests_ = Must(registry_.AddCounter<2>("ernie_gateway_requests_total", "HTTP requests answered, by route and status.",
                                           {"route", "status"}));
  requests_in_flight_ = &Must(registry_.AddGauge("ernie_gateway_requests_in_flight", "Requests being answered now."))->Get();
  streams_in_flight_ = &Must(registry_.AddGauge("ernie_gateway_streams_in_flight", "SSE streams open now."))->Get();
  client_disconnects_ = &Must(registry_.AddCounter("ernie_gateway_client_disconnects_total",
                                                   "Clients that closed the connection before their generation ended."))
                             ->Get();
  upstream_errors_ = Must(registry_.AddCounter<2>("ernie_gateway_upstream_errors_total",
                                                  "Failed calls to the tokenizer or a worker, by gRPC status code.",
                                                  {"service", "code"}));
  // The usual failures exist at 0 from the start, so rates and dashboards see them before the first one.
  for (const char* code : {"UNAVAILABLE", "RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED", "INTERNAL"}) {
    upstream_errors_->WithLabels({"worker", code});
    upstream_errors_->WithLabels({"tokenizer", code});
  }
  retries_ = &Must(registry_.AddCounter("ernie_gateway_upstream_retries_total",
                                        "Generations retried on another worker (nothing streamed yet)."))
                  ->Get();
  auto* stream_errors = Must(registry_.AddCounter<1>(
      "ernie_gateway_stream_error_events_total",
      "Streams (already answered 200) that ended with an error event instead of [DONE], by reason.", {"reason"}));
  stream_errors_[static_cast<size_t>(StreamErrorReason::kWorkerFailed)] = &stream_errors->WithLabels({"worker_failed"});
  stream_errors_[static_cast<size_t>(StreamErrorReason::kNoWorker)] = &stream_errors->WithLabels({"no_worker"});
  stream_errors_[static_cast<size_t>(StreamErrorReason::kInvalidWorkerOutput)] =
      &stream_errors->WithLabels({"invalid_worker_output"});
  ttft_ = &Must(registry_.AddHistogram("ernie_gateway_time_to_first_token_seconds",
                                       "Time from the request's arrival to its first generated token, at the gateway.",
                                       metrics::FirstTokenBuckets()))
               ->Get();
  prompt_ready_ = &Must(registry_.AddHistogram("ernie_gateway_prompt_ready_seconds",
                                               "Time from a generation request's arrival to its prompt token ids "
                                               "(chat template and tokenization), at the gateway.",
                                               metrics::LatencyPartBuckets()))
                       ->Get();
  worker_first_token_ = &Must(registry_.AddHistogram("ernie_gateway_worker_first_token_seconds",
                                                     "Time from opening a worker's Generate stream to its first "
                                                     "tokens, at the gateway.",
                                                     metrics::LatencyPartBuckets()))
                             ->Get();
  itl_ = &Must(registry_.AddHistogram("ernie_gateway_inter_token_latency_seconds",
                                      "Time between generated tokens as the gateway receives them.",
                                      metrics::TokenGapBuckets()))
              ->Get();
  e2e_ = &Must(registry_.AddHistogram("ernie_gateway_e2e_request_latency_seconds",
                                      "Time from a generation request's arrival to its last byte, at the gateway.",
                                      metrics::RequestTimeBuckets()))
              ->Get();
  draining_ = &Must(registry_.AddGauge("ernie_gateway_draining",
                                       "1 while the gateway drains after SIGTERM (new generations get 503)."))
                   ->Get();
  MustOk(metrics::RegisterProcessMetrics(registry_));
}

void GatewayMetrics::CountRequest(const std::string& route, int status) {
  requests_->WithLabels({route, absl::StrCat(status)}).Increment();
}

int64_t GatewayMetrics::requests(const std::string& route, int status) const {
  return static_cast<int64_t>(requests_->WithLabels({route, absl::StrCat(status)}).value());
}

void GatewayMetrics::UpstreamError(const std::string& service, const std::string& code) {
  upstream_errors_->WithLabels({service, code}).Increment();
}

void GatewayMetrics::ObserveTokenGap(double seconds, int64_t tokens) {
  if (tokens <= 0) return;
  itl_->Observe(seconds / static_cast<double>(tokens), static_cast<uint64_t>(tokens));
}

}  // namespace ernie::gateway
