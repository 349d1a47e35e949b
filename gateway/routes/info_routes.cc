// GET /v1/models, /ready, /version, /metrics.
#include <chrono>

#include "absl/strings/str_cat.h"
#include "gateway/routes/gateway_app.h"
#include "nlohmann/json.hpp"

namespace ernie::gateway {

HttpResponse GatewayApp::ModelsResponse() const {
  static const int64_t kStarted =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  nlohmann::ordered_json model{{"id", config_.served_model_name},
                               {"object", "model"},
                               {"created", kStarted},
                               {"owned_by", "ernie-serve"},
                               {"root", config_.model_dir},
                               {"parent", nullptr}};
  if (const int32_t length = max_model_len(); length > 0) model["max_model_len"] = length;
  nlohmann::ordered_json body{{"object", "list"}, {"data", nlohmann::ordered_json::array({std::move(model)})}};
  return HttpResponse{.body = body.dump()};
}

HttpResponse GatewayApp::ReadyResponse() const {
  const bool tokenizer_ready = tokenizer_->ready();
  int healthy = 0;
  const std::vector<WorkerStatus> statuses = workers_->Statuses();
  for (const WorkerStatus& status : statuses) healthy += status.healthy ? 1 : 0;
  const bool is_ready = !draining() && tokenizer_ready && healthy > 0;
  nlohmann::ordered_json body{{"ready", is_ready},
                              {"tokenizer", tokenizer_ready},
                              {"workers_healthy", healthy},
                              {"workers_total", statuses.size()},
                              {"draining", draining()}};
  return HttpResponse{.status = is_ready ? 200 : 503, .body = body.dump()};
}

HttpResponse GatewayApp::VersionResponse() const {
  return HttpResponse{.body = nlohmann::ordered_json{{"version", config_.version}}.dump()};
}

HttpResponse GatewayApp::MetricsResponse() const {
  return HttpResponse{.content_type = "text/plain; version=0.0.4; charset=utf-8", .body = metrics_.Exposition()};
}

}  // namespace ernie::gateway
