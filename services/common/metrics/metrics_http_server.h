// A small HTTP/1.1 server for processes that have no HTTP port of their own
// (the tokenizer and the worker): GET /metrics answers the registry's
// exposition, GET /health answers 200. One I/O thread (Boost.Beast); each
// connection serves requests until the peer closes or is idle for 30 s.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "services/common/metrics/registry.h"

namespace ernie::metrics {

class MetricsHttpServer {
 public:
  // Listens on host:port (port 0: any free port). `registry` must outlive the server.
  // Unavailable when the address cannot be bound, InvalidArgument for a bad host.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& host, int port,
                                                                  const Registry* registry);
  ~MetricsHttpServer();  // stops the thread and closes every connection
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  int port() const { return port_; }

  struct Impl;

 private:
  MetricsHttpServer(std::unique_ptr<Impl> impl, int port);
  std::unique_ptr<Impl> impl_;
  int port_;
};

}  // namespace ernie::metrics
