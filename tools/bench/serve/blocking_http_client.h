// A small synchronous HTTP/1.1 client over one keep-alive connection, for the
// set-up calls of a benchmark (GET /v1/models, POST /tokenize), not for the
// measured traffic. Not thread-safe: one caller at a time.
#pragma once

#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/beast/core/tcp_stream.hpp>

#include "absl/status/statusor.h"
#include "tools/bench/serve/base_url.h"

namespace ernie::bench {

struct HttpReply {
  int status = 0;
  std::string body;
};

class BlockingHttpClient {
 public:
  BlockingHttpClient(BaseUrl url, std::string api_key);
  ~BlockingHttpClient();

  // `path` is appended to the URL's prefix. A reply of any status is a
  // value; only a transport failure is an error (one reconnect is tried).
  absl::StatusOr<HttpReply> Get(const std::string& path);
  absl::StatusOr<HttpReply> Post(const std::string& path, const std::string& json_body);

 private:
  absl::StatusOr<HttpReply> Send(const std::string& method, const std::string& path, const std::string& body);
  absl::StatusOr<HttpReply> SendOnce(const std::string& method, const std::string& path, const std::string& body);
  absl::Status EnsureConnected();

  BaseUrl url_;
  std::string api_key_;  // sent as "Authorization: Bearer" when not empty
  boost::asio::io_context io_;
  std::unique_ptr<boost::beast::tcp_stream> stream_;  // null until connected; reset after a failure
};

}  // namespace ernie::bench
