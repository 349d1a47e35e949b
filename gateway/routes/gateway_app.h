// The gateway's HTTP application: the route table, API keys, CORS,
// X-Request-Id and per-route metrics around every handler. Handle() is the
// HttpServer's RequestHandler; it never throws and never blocks.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "gateway/http/http_message.h"
#include "gateway/http/response_channel.h"
#include "gateway/openai/generation_params.h"
#include "gateway/routes/api_keys.h"
#include "gateway/routes/gateway_metrics.h"
#include "gateway/upstream/tokenizer_client.h"
#include "gateway/upstream/upstream_timeouts.h"
#include "gateway/upstream/worker_pool.h"

namespace ernie::gateway {

struct GatewayConfig {
  std::string served_model_name;   // the only model name accepted
  std::string model_dir;           // reported as the model's root
  std::vector<std::string> api_keys;
  bool probes_need_key = false;    // --probe-auth keyed: /health, /ready, /version, /metrics need the key too
  bool cors = false;
  std::string web_dir;             // the chat page's folder
  GenerationDefaults defaults;     // generation_config.json
  GenerationLimits limits;
  UpstreamTimeouts upstream_timeouts;  // first token, stall and deadline of Worker.Generate calls
  int32_t fallback_max_model_len = 0;  // when no worker has reported one yet (0: unknown)
  std::string version;
};

class GatewayApp {
 public:
  GatewayApp(GatewayConfig config, TokenizerClient* tokenizer, WorkerPool* workers);

  void Handle(HttpRequest request, std::shared_ptr<ResponseChannel> channel);

  GatewayMetrics& metrics() { return metrics_; }
  const GatewayConfig& config() const { return config_; }
  bool ready() const;  // false while draining
  // SIGTERM: /ready turns 503 and new generations get 503; streams in flight continue.
  void StartDraining();
  bool draining() const { return draining_; }
  int32_t max_model_len() const;  // from the workers' ModelInfo

  // Route handlers (one file each group); `channel` is already decorated.
  void HandleChat(const HttpRequest& request, const std::string& request_id, std::shared_ptr<ResponseChannel> channel);
  void HandleCompletions(const HttpRequest& request, const std::string& request_id,
                         std::shared_ptr<ResponseChannel> channel);
  void HandleTokenize(const HttpRequest& request, const std::string& request_id,
                      std::shared_ptr<ResponseChannel> channel);
  void HandleDetokenize(const HttpRequest& request, std::shared_ptr<ResponseChannel> channel);
  HttpResponse ModelsResponse() const;
  HttpResponse ReadyResponse() const;
  HttpResponse VersionResponse() const;
  HttpResponse MetricsResponse() const;

  TokenizerClient* tokenizer() const { return tokenizer_; }
  WorkerPool* workers() const { return workers_; }

 private:
  GatewayConfig config_;
  ApiKeys api_keys_;
  TokenizerClient* tokenizer_;  // not owned
  WorkerPool* workers_;         // not owned
  GatewayMetrics metrics_;
  std::atomic<bool> draining_{false};
};

// The JSON error response for `error` (with Retry-After when it has one).
HttpResponse ErrorResponse(const ApiError& error);

// A fresh id: `prefix` + 32 hex digits from a CSPRNG-seeded generator.
std::string RandomId(std::string_view prefix);

}  // namespace ernie::gateway
