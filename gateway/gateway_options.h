// ernie-gateway's command line, read into the options of its parts.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gateway/http/http_server.h"
#include "gateway/routes/gateway_app.h"
#include "gateway/upstream/worker_pool.h"
#include "services/common/grpc_tls.h"

namespace ernie::gateway {

struct GatewayOptions {
  HttpServerOptions http;
  GatewayConfig app;
  WorkerPoolOptions workers;
  std::string tokenizer_address;
  services::TlsFiles upstream_tls;  // TLS to the tokenizer and workers (none: plaintext)
  int drain_timeout_s = 30;  // SIGTERM: how long requests in flight may take before the process exits
};

// Parses argv (and ERNIE_API_KEY). InvalidArgument naming the bad flag;
// a NotFound-free "help" result is reported as Cancelled with the usage text.
absl::StatusOr<GatewayOptions> ParseGatewayOptions(int argc, char** argv);

}  // namespace ernie::gateway
