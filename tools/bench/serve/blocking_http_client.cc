#include "tools/bench/serve/blocking_http_client.h"

#include <chrono>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "absl/strings/str_cat.h"

namespace ernie::bench {

namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

BlockingHttpClient::BlockingHttpClient(BaseUrl url, std::string api_key)
    : url_(std::move(url)), api_key_(std::move(api_key)) {}

BlockingHttpClient::~BlockingHttpClient() = default;

absl::StatusOr<HttpReply> BlockingHttpClient::Get(const std::string& path) { return Send("GET", path, ""); }

absl::StatusOr<HttpReply> BlockingHttpClient::Post(const std::string& path, const std::string& json_body) {
  return Send("POST", path, json_body);
}

absl::Status BlockingHttpClient::EnsureConnected() {
  if (stream_) return absl::OkStatus();
  boost::system::error_code ec;
  tcp::resolver resolver(io_);
  const auto endpoints = resolver.resolve(url_.host, url_.port, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("resolve ", url_.HostHeader(), ": ", ec.message()));
  auto stream = std::make_unique<boost::beast::tcp_stream>(io_);
  stream->expires_after(std::chrono::seconds(30));
  stream->connect(endpoints, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("connect ", url_.HostHeader(), ": ", ec.message()));
  stream->socket().set_option(tcp::no_delay(true), ec);
  stream_ = std::move(stream);
  return absl::OkStatus();
}

absl::StatusOr<HttpReply> BlockingHttpClient::Send(const std::string& method, const std::string& path,
                                                   const std::string& body) {
  // A kept-alive connection the server has closed fails on first use: retry once on a fresh one.
  const bool was_connected = stream_ != nullptr;
  auto reply = SendOnce(method, path, body);
  if (!reply.ok() && was_connected) reply = SendOnce(method, path, body);
  return reply;
}

absl::StatusOr<HttpReply> BlockingHttpClient::SendOnce(const std::string& method, const std::string& path,
                                                       const std::string& body) {
  if (auto s = EnsureConnected(); !s.ok()) return s;
  http::request<http::string_body> request(http::string_to_verb(method), url_.path_prefix + path, 11);
  request.set(http::field::host, url_.HostHeader());
  request.set(http::field::user_agent, "ernie-bench");
  request.keep_alive(true);
  if (!api_key_.empty()) request.set(http::field::authorization, absl::StrCat("Bearer ", api_key_));
  if (method == "POST") {
    request.set(http::field::content_type, "application/json");
    request.body() = body;
    request.prepare_payload();
  }
  boost::system::error_code ec;
  stream_->expires_after(std::chrono::seconds(60));
  http::write(*stream_, request, ec);
  boost::beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64u << 20);
  if (!ec) http::read(*stream_, buffer, parser, ec);
  if (ec) {
    stream_.reset();
    return absl::UnavailableError(absl::StrCat(method, " ", url_.HostHeader(), path, ": ", ec.message()));
  }
  HttpReply reply{static_cast<int>(parser.get().result_int()), std::move(parser.get().body())};
  if (!parser.get().keep_alive()) stream_.reset();
  return reply;
}

}  // namespace ernie::bench
