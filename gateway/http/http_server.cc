#include "gateway/http/http_server.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/strand.hpp"
#include "gateway/http/http_session.h"

namespace ernie::gateway {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct HttpServer::Impl {
  HttpServerOptions options;
  std::shared_ptr<const RequestHandler> handler;
  asio::io_context io{1};
  // Keeps io.run() going while no connection is open.
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(io);
  tcp::acceptor acceptor{io};
  std::vector<std::thread> threads;
  bool stopped = false;

  void Accept() {
    acceptor.async_accept(asio::make_strand(io), [this](boost::system::error_code ec, tcp::socket socket) {
      if (ec) {
        if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
      } else {
        StartHttpSession(std::move(socket), options, handler);
      }
      Accept();
    });
  }
};

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                             RequestHandler handler) {
  if (options.io_threads < 1) return absl::InvalidArgumentError("http: io_threads must be at least 1");
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->handler = std::make_shared<const RequestHandler>(std::move(handler));
  boost::system::error_code ec;
  const asio::ip::address address = asio::ip::make_address(options.host, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("http: bad --host '", options.host, "': ", ec.message()));
  const tcp::endpoint endpoint(address, options.port);
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("http: cannot listen on ", options.host, ":", options.port, ": ", ec.message()));
  }
  impl->Accept();
  Impl* raw = impl.get();
  for (int i = 0; i < options.io_threads; ++i) {
    raw->threads.emplace_back([raw] { raw->io.run(); });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() { Stop(); }

uint16_t HttpServer::port() const {
  boost::system::error_code ec;
  const tcp::endpoint endpoint = impl_->acceptor.local_endpoint(ec);
  return ec ? 0 : endpoint.port();
}

void HttpServer::Stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  asio::post(impl_->acceptor.get_executor(), [raw = impl_.get()] {
    boost::system::error_code ignored;
    raw->acceptor.close(ignored);
  });
  impl_->work.reset();
  // Open connections (long streams) would keep run() going: stop outright.
  impl_->io.stop();
  for (std::thread& thread : impl_->threads) thread.join();
}

}  // namespace ernie::gateway
