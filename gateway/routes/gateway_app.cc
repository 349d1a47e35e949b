#include "gateway/routes/gateway_app.h"

#include <array>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gateway/routes/decorated_channel.h"
#include "gateway/routes/static_files.h"

namespace ernie::gateway {
namespace {

struct Route {
  std::string_view path;
  std::string_view method;
  bool needs_key;  // API-key protected (the OpenAI and tokenizer routes)
};

constexpr std::array<Route, 9> kRoutes = {{
    {"/v1/chat/completions", "POST", true},
    {"/v1/completions", "POST", true},
    {"/v1/models", "GET", true},
    {"/tokenize", "POST", true},
    {"/detokenize", "POST", true},
    {"/health", "GET", false},
    {"/ready", "GET", false},
    {"/version", "GET", false},
    {"/metrics", "GET", false},
}};

const Route* FindRoute(std::string_view path) {
  for (const Route& route : kRoutes) {
    if (route.path == path) return &route;
  }
  return nullptr;
}

// A client's X-Request-Id is kept when it is short and printable (it goes
// into logs and gRPC metadata); otherwise a fresh one is made.
std::string RequestIdFor(const HttpRequest& request) {
  const std::string_view given = request.Header("x-request-id");
  bool usable = !given.empty() && given.size() <= 128;
  for (char c : given) usable = usable && c > 0x20 && c < 0x7f;
  return usable ? std::string(given) : RandomId("");
}

}  // namespace

std::string RandomId(std::string_view prefix) {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  return absl::StrFormat("%s%016x%016x", std::string(prefix), generator(), generator());
}

HttpResponse ErrorResponse(const ApiError& error) {
  HttpResponse response{.status = error.status, .body = error.ToJsonString()};
  if (error.retry_after_seconds) response.headers.emplace_back("Retry-After", absl::StrCat(*error.retry_after_seconds));
  return response;
}

GatewayApp::GatewayApp(GatewayConfig config, TokenizerClient* tokenizer, WorkerPool* workers)
    : config_(std::move(config)),
      api_keys_(config_.api_keys),
      tokenizer_(tokenizer),
      workers_(workers),
      metrics_(config_.served_model_name) {}

bool GatewayApp::ready() const { return !draining_ && tokenizer_->ready() && workers_->AnyHealthy(); }

void GatewayApp::StartDraining() {
  draining_ = true;
  metrics_.SetDraining(true);
}

int32_t GatewayApp::max_model_len() const {
  if (auto info = workers_->model_info(); info && info->max_model_len() > 0) return info->max_model_len();
  return config_.fallback_max_model_len;
}

void GatewayApp::Handle(HttpRequest request, std::shared_ptr<ResponseChannel> raw_channel) {
  const std::string request_id = RequestIdFor(request);
  const Route* route = FindRoute(request.path);
  const bool is_page = request.method == "GET" && route == nullptr;
  const std::string route_name = route ? std::string(route->path) : (is_page ? "static" : "unknown");
  auto channel = std::make_shared<DecoratedChannel>(std::move(raw_channel), &metrics_, route_name, request_id,
                                                    config_.cors);

  if (request.method == "OPTIONS" && config_.cors) {
    // CORS preflight: any origin, the methods and headers our routes use.
    channel->Respond(HttpResponse{.status = 204,
                                  .content_type = "",
                                  .headers = {{"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
                                              {"Access-Control-Allow-Headers",
                                               "Authorization, Content-Type, X-Request-Id"},
                                              {"Access-Control-Max-Age", "86400"}}});
    return;
  }
  // Everything under /v1 needs the key, known route or not (no probing for routes without one).
  const bool under_v1 = request.path == "/v1" || absl::StartsWith(request.path, "/v1/");
  if (under_v1 && request.method != "OPTIONS" && !api_keys_.Allows(request.Header("authorization"))) {
    return channel->Respond(ErrorResponse(Unauthorized()));
  }
  if (is_page) {
    if (auto file = ServeStaticFile(config_.web_dir, request.path)) return channel->Respond(std::move(*file));
    return channel->Respond(ErrorResponse(NotFound(absl::StrCat("No route or file for GET ", request.path))));
  }
  if (route == nullptr) {
    return channel->Respond(ErrorResponse(NotFound(absl::StrCat("No route for ", request.method, " ", request.path))));
  }
  if (request.method != route->method) {
    HttpResponse response = ErrorResponse(MethodNotAllowed(request.method, request.path));
    response.headers.emplace_back("Allow", std::string(route->method));
    return channel->Respond(std::move(response));
  }
  if ((route->needs_key || config_.probes_need_key) && !api_keys_.Allows(request.Header("authorization"))) {
    return channel->Respond(ErrorResponse(Unauthorized()));
  }

  const std::string_view path = route->path;
  if (draining_ && (path == "/v1/chat/completions" || path == "/v1/completions")) {
    return channel->Respond(ErrorResponse(ServiceUnavailable("The server is shutting down")));
  }
  if (path == "/v1/chat/completions") return HandleChat(request, request_id, channel);
  if (path == "/v1/completions") return HandleCompletions(request, request_id, channel);
  if (path == "/tokenize") return HandleTokenize(request, request_id, channel);
  if (path == "/detokenize") return HandleDetokenize(request, channel);
  if (path == "/v1/models") return channel->Respond(ModelsResponse());
  if (path == "/health") return channel->Respond(HttpResponse{.status = 200, .content_type = ""});
  if (path == "/ready") return channel->Respond(ReadyResponse());
  if (path == "/version") return channel->Respond(VersionResponse());
  if (path == "/metrics") return channel->Respond(MetricsResponse());
  channel->Respond(ErrorResponse(InternalError(absl::StrCat("route ", std::string(path), " has no handler"))));
}

}  // namespace ernie::gateway
