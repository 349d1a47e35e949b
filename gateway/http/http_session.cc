#include "gateway/http/http_session.h"

#include <array>
#include <span>

#include <atomic>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "boost/asio/write.hpp"
#include "boost/asio/dispatch.hpp"
#include "boost/asio/post.hpp"
#include "boost/beast/core/flat_buffer.hpp"
#include "boost/beast/core/tcp_stream.hpp"
#include "boost/beast/http/error.hpp"
#include "boost/beast/http/parser.hpp"
#include "boost/beast/http/read.hpp"
#include "boost/beast/http/string_body.hpp"
#include "gateway/http/request_reader.h"

namespace ernie::gateway {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

std::string PlainError(std::string_view message) {
  return std::string(R"({"error":{"message":")") + std::string(message) +
         R"(","type":"invalid_request_error","param":null,"code":null}})";
}

// State of one connection. Every member is touched on the strand only,
// except the atomics, which other threads read.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const HttpServerOptions& options, std::shared_ptr<const RequestHandler> handler)
      : stream_(std::move(socket)), options_(options), handler_(std::move(handler)) {}

  void Start() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->ReadRequest(); });
  }

  // --- called through the channel from any thread ---
  void PostRespond(uint64_t exchange, HttpResponse response);
  void PostStartStream(uint64_t exchange, HttpResponse head);
  void PostSend(uint64_t exchange, std::string data);
  void PostEnd(uint64_t exchange);
  void PostOnClosed(uint64_t exchange, std::function<void()> on_closed);
  void PostWhenWritable(uint64_t exchange, std::function<void()> resume);
  size_t buffered_bytes() const { return buffered_.load(std::memory_order_relaxed); }
  bool congested() const { return buffered_bytes() > options_.buffer_high_bytes; }
  bool closed() const { return closed_flag_.load(std::memory_order_relaxed); }

 private:
  enum class Phase { kReading, kAwaitingAnswer, kStreaming, kFinishing };

  void ReadRequest();
  void OnHeaderRead(beast::error_code ec);
  void OnRequestRead(beast::error_code ec);
  void WatchForClose();
  void Dispatch(HttpRequest request);
  void RespondOnStrand(HttpResponse response);
  void Enqueue(std::string bytes);
  void WriteNext();
  // Writes what the socket takes now without waiting (a gather write of the
  // queue's head); returns the bytes written, 0 with `ec` clear when the
  // socket's buffer is full.
  size_t WriteNow(beast::error_code& ec);
  void OnWritten(beast::error_code ec, size_t bytes);
  void Consume(size_t bytes);  // `bytes` of the queue's head reached the socket
  void AfterWrite();           // the queue drained or a write finished: resume writers, go on, or end
  void FinishExchange();
  void Close();
  // Close() for a reader cut off as too slow: the connection is reset (RST)
  // so the bytes already in the kernel's send buffer (megabytes on loopback)
  // are dropped now, and the client sees the cut at once, not after it
  // has read them.
  void Abort();
  // While congested the socket lingers 0 s: if the write timeout fires then
  // (beast closes the socket itself), the close is a reset, as in Abort().
  void UpdateLinger();
  void FireClosed();
  void FireWritable();
  void FailBeforeDispatch(int status, std::string_view message);

  beast::tcp_stream stream_;
  const HttpServerOptions& options_;  // owned by the server, outlives sessions
  std::shared_ptr<const RequestHandler> handler_;
  beast::flat_buffer buffer_;                                // unparsed input
  std::optional<http::request_parser<http::string_body>> parser_;
  Phase phase_ = Phase::kReading;
  uint64_t exchange_ = 0;          // counts requests; stale channel calls are dropped
  bool keep_alive_ = true;         // of the current request
  bool answered_ = false;          // Respond or StartStream happened for this exchange
  bool watching_ = false;          // a close-watch read is pending
  bool writing_ = false;           // an async write, or the hop after a drained one, is pending
  bool closed_ = false;
  bool reset_on_close_ = false;    // SO_LINGER 0 is set (see UpdateLinger)
  std::deque<std::string> queue_;  // bytes waiting for the socket
  std::function<void()> on_closed_;
  std::vector<std::function<void()>> on_writable_;
  std::atomic<size_t> buffered_{0};
  std::atomic<bool> closed_flag_{false};
};

class SessionChannel : public ResponseChannel {
 public:
  SessionChannel(std::shared_ptr<Session> session, uint64_t exchange)
      : session_(std::move(session)), exchange_(exchange) {}
  void Respond(HttpResponse response) override { session_->PostRespond(exchange_, std::move(response)); }
  void StartStream(HttpResponse head) override { session_->PostStartStream(exchange_, std::move(head)); }
  void Send(std::string data) override { session_->PostSend(exchange_, std::move(data)); }
  void End() override { session_->PostEnd(exchange_); }
  void SetOnClosed(std::function<void()> on_closed) override {
    session_->PostOnClosed(exchange_, std::move(on_closed));
  }
  size_t buffered_bytes() const override { return session_->buffered_bytes(); }
  bool congested() const override { return session_->congested(); }
  void WhenWritable(std::function<void()> resume) override {
    session_->PostWhenWritable(exchange_, std::move(resume));
  }
  bool closed() const override { return session_->closed(); }

 private:
  std::shared_ptr<Session> session_;
  uint64_t exchange_;
};

void Session::ReadRequest() {
  if (closed_) return;
  phase_ = Phase::kReading;
  parser_.emplace();
  parser_->body_limit(options_.max_body_bytes);
  parser_->header_limit(static_cast<std::uint32_t>(options_.max_header_bytes));
  stream_.expires_after(options_.read_timeout);
  http::async_read_header(stream_, buffer_, *parser_,
                          [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeaderRead(ec); });
}

// Headers first, so a body over the limit is refused from its
// Content-Length and "Expect: 100-continue" clients (curl, for bodies over
// 1 KiB) are told to go on instead of waiting a second.
void Session::OnHeaderRead(beast::error_code ec) {
  if (ec || closed_) return OnRequestRead(ec);
  auto read_body = [self = shared_from_this()] {
    http::async_read(self->stream_, self->buffer_, *self->parser_,
                     [self](beast::error_code ec, size_t) { self->OnRequestRead(ec); });
  };
  if (parser_->is_done()) return OnRequestRead(ec);
  const auto& header = parser_->get();
  const auto expect = header.find(http::field::expect);
  if (expect != header.end() && absl::EqualsIgnoreCase(std::string(expect->value()), "100-continue")) {
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    asio::async_write(stream_, asio::buffer(kContinue.data(), kContinue.size()),
                      [self = shared_from_this(), read_body](beast::error_code ec, size_t) {
                        if (ec) return self->Close();
                        read_body();
                      });
    return;
  }
  read_body();
}

void Session::OnRequestRead(beast::error_code ec) {
  if (closed_) return;
  if (ec == http::error::body_limit) {
    return FailBeforeDispatch(413, absl::StrCat("request body too large: the limit is ", options_.max_body_bytes,
                                                " bytes (--max-body-bytes)"));
  }
  if (ec == http::error::header_limit) {
    return FailBeforeDispatch(431, absl::StrCat("request headers too large: the limit is ", options_.max_header_bytes,
                                                " bytes (--max-header-bytes)"));
  }
  if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == asio::error::eof ||
      ec == asio::error::connection_reset || ec == asio::error::operation_aborted) {
    return Close();
  }
  if (ec) return FailBeforeDispatch(400, "malformed HTTP request");

  HttpRequest request = ToHttpRequest(parser_->release());
  parser_.reset();
  Dispatch(std::move(request));
}

void Session::Dispatch(HttpRequest request) {
  ++exchange_;
  keep_alive_ = request.keep_alive;
  answered_ = false;
  on_closed_ = nullptr;
  on_writable_.clear();
  phase_ = Phase::kAwaitingAnswer;
  WatchForClose();
  auto channel = std::make_shared<SessionChannel>(shared_from_this(), exchange_);
  try {
    (*handler_)(std::move(request), channel);
  } catch (const std::exception& e) {
    RespondOnStrand(HttpResponse{.status = 500, .body = PlainError("internal error")});
  } catch (...) {
    RespondOnStrand(HttpResponse{.status = 500, .body = PlainError("internal error")});
  }
}

// While a response is being produced the client sends nothing (or a
// pipelined request, kept in buffer_ for later); a read that fails means the
// client went away, which must cancel the upstream work at once.
void Session::WatchForClose() {
  if (closed_ || watching_) return;
  watching_ = true;
  stream_.expires_never();
  auto space = buffer_.prepare(4096);
  stream_.async_read_some(space, [self = shared_from_this()](beast::error_code ec, size_t bytes) {
    self->watching_ = false;
    if (self->closed_) return;
    if (ec == asio::error::operation_aborted) {
      // Cancelled by FinishExchange: the next request may begin.
      if (self->phase_ == Phase::kReading) self->ReadRequest();
      return;
    }
    if (ec) return self->Close();
    self->buffer_.commit(bytes);
    // Data arrived (a pipelined request): keep it; if the exchange is over
    // already, parse it now.
    if (self->phase_ == Phase::kReading) self->ReadRequest();
  });
}

void Session::PostRespond(uint64_t exchange, HttpResponse response) {
  asio::dispatch(stream_.get_executor(), [self = shared_from_this(), exchange, r = std::move(response)]() mutable {
    if (exchange == self->exchange_) self->RespondOnStrand(std::move(r));
  });
}

void Session::RespondOnStrand(HttpResponse response) {
  if (answered_ || closed_) return;
  answered_ = true;
  phase_ = Phase::kFinishing;
  Enqueue(SerializeResponse(response, keep_alive_));
}

void Session::PostStartStream(uint64_t exchange, HttpResponse head) {
  asio::dispatch(stream_.get_executor(), [self = shared_from_this(), exchange, h = std::move(head)]() mutable {
    if (exchange != self->exchange_ || self->answered_ || self->closed_) return;
    self->answered_ = true;
    self->phase_ = Phase::kStreaming;
    self->Enqueue(SerializeStreamHead(h, self->keep_alive_));
  });
}

void Session::PostSend(uint64_t exchange, std::string data) {
  if (data.empty()) return;
  // Counted before the hop so congested() reflects it at once.
  std::string chunk = SerializeChunk(data);
  asio::dispatch(stream_.get_executor(), [self = shared_from_this(), exchange, c = std::move(chunk)]() mutable {
    if (exchange != self->exchange_ || self->phase_ != Phase::kStreaming || self->closed_) return;
    self->Enqueue(std::move(c));
    if (self->buffered_bytes() > self->options_.buffer_hard_bytes) self->Abort();  // reader far too slow
  });
}

void Session::PostEnd(uint64_t exchange) {
  asio::dispatch(stream_.get_executor(), [self = shared_from_this(), exchange] {
    if (exchange != self->exchange_ || self->phase_ != Phase::kStreaming || self->closed_) return;
    self->phase_ = Phase::kFinishing;
    self->Enqueue(std::string(kLastChunk));
  });
}

void Session::PostOnClosed(uint64_t exchange, std::function<void()> on_closed) {
  asio::dispatch(stream_.get_executor(), [self = shared_from_this(), exchange, f = std::move(on_closed)]() mutable {
    if (exchange != self->exchange_) return;
    if (self->closed_) {
      if (f) f();
      return;
    }
    self->on_closed_ = std::move(f);
  });
}

void Session::PostWhenWritable(uint64_t exchange, std::function<void()> resume) {
  asio::dispatch(stream_.get_executor(), [self = shared_from_this(), exchange, f = std::move(resume)]() mutable {
    if (exchange != self->exchange_ || self->closed_ || self->buffered_bytes() <= self->options_.buffer_low_bytes) {
      if (f) f();
      return;
    }
    self->on_writable_.push_back(std::move(f));
  });
}

void Session::Enqueue(std::string bytes) {
  buffered_.fetch_add(bytes.size(), std::memory_order_relaxed);
  queue_.push_back(std::move(bytes));
  UpdateLinger();
  if (!writing_) WriteNext();
}

// A streamed token is one small chunk, and the socket's send buffer nearly
// always has room for it: it is written at once, on the strand, with no
// asynchronous operation, write timer or completion hop (those were ~1/4 of
// the gateway's CPU a token; tools/bench/run-serve-emulated). Only a chunk
// the socket cannot take now waits, under the write timeout, as before.
void Session::WriteNext() {
  if (closed_ || writing_ || queue_.empty()) return;
  beast::error_code ec;
  const size_t bytes = WriteNow(ec);
  if (ec) return Close();  // a broken connection
  Consume(bytes);
  if (queue_.empty()) {
    // Drained at once. Waking writers or ending the exchange goes through
    // the strand's queue, so whoever enqueued (a route answering inside
    // Dispatch, say) never sees the exchange end beneath it.
    if (phase_ == Phase::kFinishing || !on_writable_.empty()) {
      writing_ = true;
      asio::post(stream_.get_executor(), [self = shared_from_this()] {
        self->writing_ = false;
        if (!self->closed_) self->AfterWrite();
      });
    }
    return;
  }
  writing_ = true;
  // Only the write's timer is armed: the close-watch read stays untimed.
  stream_.expires_after(options_.write_timeout);
  stream_.async_write_some(asio::buffer(queue_.front()),
                           [self = shared_from_this()](beast::error_code ec, size_t bytes) {
                             self->OnWritten(ec, bytes);
                           });
}

size_t Session::WriteNow(beast::error_code& ec) {
  constexpr size_t kMaxBuffers = 16;
  std::array<asio::const_buffer, kMaxBuffers> buffers;
  size_t count = 0;
  for (auto it = queue_.begin(); it != queue_.end() && count < kMaxBuffers; ++it) buffers[count++] = asio::buffer(*it);
  // The socket is non-blocking from the start (StartHttpSession).
  const size_t bytes = stream_.socket().write_some(std::span(buffers.data(), count), ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) ec.clear();
  return ec ? 0 : bytes;
}

void Session::OnWritten(beast::error_code ec, size_t bytes) {
  writing_ = false;
  if (closed_) return;
  if (ec) return Close();  // timeout (a reader that stopped: reset if congested) or a broken connection
  Consume(bytes);
  AfterWrite();
}

void Session::Consume(size_t bytes) {
  if (bytes == 0) return;
  buffered_.fetch_sub(bytes, std::memory_order_relaxed);
  UpdateLinger();
  while (bytes > 0) {
    std::string& front = queue_.front();
    if (bytes < front.size()) {
      front.erase(0, bytes);
      return;
    }
    bytes -= front.size();
    queue_.pop_front();
  }
}

void Session::AfterWrite() {
  if (buffered_bytes() <= options_.buffer_low_bytes) FireWritable();
  if (!queue_.empty()) return WriteNext();
  if (phase_ == Phase::kFinishing) FinishExchange();
}

void Session::FinishExchange() {
  on_closed_ = nullptr;
  on_writable_.clear();
  if (!keep_alive_) {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    return Close();
  }
  phase_ = Phase::kReading;
  if (watching_) {
    stream_.socket().cancel();  // its handler starts the next read
  } else {
    ReadRequest();
  }
}

void Session::FailBeforeDispatch(int status, std::string_view message) {
  ++exchange_;
  keep_alive_ = false;  // the stream position is unknown after a parse failure
  answered_ = false;
  RespondOnStrand(HttpResponse{.status = status, .body = PlainError(message)});
}

void Session::UpdateLinger() {
  const bool congested_now = buffered_bytes() > options_.buffer_high_bytes;
  const bool drained = buffered_bytes() <= options_.buffer_low_bytes;
  if (congested_now == reset_on_close_ || (!congested_now && !drained)) return;
  beast::error_code ignored;
  stream_.socket().set_option(asio::socket_base::linger(congested_now, 0), ignored);
  reset_on_close_ = congested_now;
}

void Session::Abort() {
  if (closed_) return;
  beast::error_code ignored;
  stream_.socket().set_option(asio::socket_base::linger(true, 0), ignored);  // close() sends RST
  stream_.socket().close(ignored);
  Close();
}

void Session::Close() {
  if (closed_) return;
  closed_ = true;
  closed_flag_.store(true, std::memory_order_relaxed);
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.close();
  queue_.clear();
  buffered_.store(0, std::memory_order_relaxed);
  FireClosed();
  FireWritable();
}

void Session::FireClosed() {
  std::function<void()> f = std::move(on_closed_);
  on_closed_ = nullptr;
  if (f) f();
}

void Session::FireWritable() {
  std::vector<std::function<void()>> waiting = std::move(on_writable_);
  on_writable_.clear();
  for (auto& f : waiting) f();
}

}  // namespace

void StartHttpSession(tcp::socket socket, const HttpServerOptions& options,
                      std::shared_ptr<const RequestHandler> handler) {
  boost::system::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  // For WriteNow's writes, which must not block the strand; Asio's own
  // asynchronous operations work the same either way.
  socket.non_blocking(true, ignored);
  std::make_shared<Session>(std::move(socket), options, std::move(handler))->Start();
}

}  // namespace ernie::gateway
