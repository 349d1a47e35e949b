#include "services/common/metrics/metrics_http_server.h"

#include <chrono>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"

namespace ernie::metrics {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr auto kIdleTimeout = std::chrono::seconds(30);

// One connection: read a request, answer it, repeat while keep-alive.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const Registry* registry) : stream_(std::move(socket)), registry_(registry) {}

  void Read() {
    request_ = {};
    parser_.emplace();
    parser_->header_limit(16 << 10);
    parser_->body_limit(16 << 10);
    stream_.expires_after(kIdleTimeout);
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->Close();
      self->request_ = self->parser_->release();
      self->Answer();
    });
  }

 private:
  void Answer() {
    response_ = {};
    response_.version(request_.version());
    response_.keep_alive(request_.keep_alive());
    response_.set(http::field::server, "ernie-metrics");
    const std::string_view target(request_.target().data(), request_.target().size());
    const std::string_view path = target.substr(0, target.find('?'));
    if (request_.method() != http::verb::get && request_.method() != http::verb::head) {
      response_.result(http::status::method_not_allowed);
      response_.set(http::field::allow, "GET, HEAD");
      response_.set(http::field::content_type, "text/plain");
      response_.body() = "only GET\n";
    } else if (path == "/metrics") {
      response_.result(http::status::ok);
      response_.set(http::field::content_type, std::string(Registry::kContentType));
      response_.body() = registry_->Exposition();
    } else if (path == "/health") {
      response_.result(http::status::ok);
      response_.set(http::field::content_type, "text/plain");
      response_.body() = "ok\n";
    } else {
      response_.result(http::status::not_found);
      response_.set(http::field::content_type, "text/plain");
      response_.body() = absl::StrCat("no route ", std::string(path), " (try /metrics)\n");
    }
    response_.prepare_payload();
    if (request_.method() == http::verb::head) response_.body().clear();
    stream_.expires_after(kIdleTimeout);
    http::async_write(stream_, response_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec || !self->response_.keep_alive()) return self->Close();
      self->Read();
    });
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  beast::tcp_stream stream_;
  const Registry* registry_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::request<http::string_body> request_;
  http::response<http::string_body> response_;
};

}  // namespace

struct MetricsHttpServer::Impl {
  const Registry* registry = nullptr;
  asio::io_context io{1};
  tcp::acceptor acceptor{io};
  std::thread thread;

  void Accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
      if (!ec) std::make_shared<Session>(std::move(socket), registry)->Read();
      Accept();
    });
  }
};

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(const std::string& host, int port,
                                                                             const Registry* registry) {
  if (port < 0 || port > 65535) return absl::InvalidArgumentError(absl::StrCat("metrics port ", port, " is out of range"));
  auto impl = std::make_unique<Impl>();
  impl->registry = registry;
  beast::error_code ec;
  const asio::ip::address address = asio::ip::make_address(host, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("metrics: bad host '", host, "': ", ec.message()));
  const tcp::endpoint endpoint(address, static_cast<uint16_t>(port));
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("metrics: cannot listen on ", host, ":", port, ": ", ec.message()));
  const int bound = impl->acceptor.local_endpoint().port();
  impl->Accept();
  Impl* raw = impl.get();
  raw->thread = std::thread([raw] { raw->io.run(); });
  return std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer(std::move(impl), bound));
}

MetricsHttpServer::MetricsHttpServer(std::unique_ptr<Impl> impl, int port) : impl_(std::move(impl)), port_(port) {}

MetricsHttpServer::~MetricsHttpServer() {
  // Stopping the context drops every pending operation; sessions die with it.
  impl_->io.stop();
  impl_->thread.join();
}

}  // namespace ernie::metrics
