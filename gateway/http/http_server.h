// An asynchronous HTTP/1.1 server (Boost.Beast over Asio): a fixed number of
// I/O threads, one strand per connection, keep-alive, body/header limits,
// read and write timeouts. Routes receive each request on its connection's
// strand together with a ResponseChannel and must not block.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "gateway/http/http_message.h"
#include "gateway/http/response_channel.h"

namespace ernie::gateway {

using RequestHandler = std::function<void(HttpRequest, std::shared_ptr<ResponseChannel>)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;  // 0: any free port (see HttpServer::port)
  int io_threads = 2;
  size_t max_body_bytes = 8u << 20;    // larger bodies get 413
  size_t max_header_bytes = 64u << 10; // larger headers get 431
  // Reading one request (from its first byte or the idle keep-alive wait).
  std::chrono::milliseconds read_timeout{60'000};
  // One socket write; a reader slower than this is cut off.
  std::chrono::milliseconds write_timeout{30'000};
  // Per-connection output buffer: above high the producer is told to pause,
  // below low it resumes; beyond hard the connection is cut.
  size_t buffer_high_bytes = 256u << 10;
  size_t buffer_low_bytes = 64u << 10;
  size_t buffer_hard_bytes = 8u << 20;
};

class HttpServer {
 public:
  // Binds and listens; the I/O threads start serving at once.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           RequestHandler handler);
  ~HttpServer();  // Stop()s
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const;  // the bound port
  // Closes the listener and every connection and joins the I/O threads.
  void Stop();

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ernie::gateway
