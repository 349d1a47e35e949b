#include "tools/bench/serve/stream_connection.h"

#include <boost/asio/connect.hpp>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace ernie::bench {

namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

namespace {

double Seconds(BenchClock::duration d) { return std::chrono::duration<double>(d).count(); }

// The OpenAI error JSON's message when there is one, else the start of the body.
std::string ErrorMessage(int status, const std::string& body) {
  try {
    const auto json = nlohmann::json::parse(body);
    if (json.contains("error") && json["error"].is_object() && json["error"].contains("message"))
      return absl::StrCat("HTTP ", status, ": ", json["error"]["message"].dump());
  } catch (const nlohmann::json::exception&) {
  }
  return absl::StrCat("HTTP ", status, ": ", body.substr(0, 300));
}

}  // namespace

StreamConnection::StreamConnection(boost::asio::io_context& io, RequestPlan* plan,
                                   tcp::resolver::results_type endpoints)
    : plan_(plan), endpoints_(std::move(endpoints)), stream_(io), arrival_timer_(io) {}

void StreamConnection::Start() { ClaimNext(); }

void StreamConnection::ClaimNext() {
  const int index = plan_->next.fetch_add(1);
  if (index >= static_cast<int>(plan_->bodies.size())) {
    boost::system::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    return;  // the last handler holding this connection returns: it is destroyed
  }
  const auto due = plan_->start + std::chrono::duration_cast<BenchClock::duration>(
                                      std::chrono::duration<double>(plan_->arrival_s[static_cast<size_t>(index)]));
  if (due <= BenchClock::now()) return Begin(index);
  arrival_timer_.expires_at(due);
  arrival_timer_.async_wait([self = shared_from_this(), index](const boost::system::error_code&) { self->Begin(index); });
}

void StreamConnection::Begin(int index) {
  index_ = index;
  result_ = RequestResult{};
  error_body_.clear();
  event_error_.clear();
  usage_completion_tokens_.reset();
  usage_prompt_tokens_.reset();
  retried_ = false;
  request_ = http::request<http::string_body>(http::verb::post, plan_->target, 11);
  request_.set(http::field::host, plan_->url.HostHeader());
  request_.set(http::field::user_agent, "ernie-bench");
  request_.set(http::field::content_type, "application/json");
  request_.set(http::field::accept, "text/event-stream");
  if (!plan_->api_key.empty()) request_.set(http::field::authorization, absl::StrCat("Bearer ", plan_->api_key));
  request_.keep_alive(true);
  request_.body() = plan_->bodies[static_cast<size_t>(index)];
  request_.prepare_payload();
  sent_ = BenchClock::now();
  stream_.expires_after(std::chrono::duration_cast<BenchClock::duration>(std::chrono::duration<double>(plan_->timeout_s)));
  if (connected_) {
    reused_ = true;
    Write();
  } else {
    reused_ = false;
    Connect();
  }
}

void StreamConnection::Connect() {
  stream_.async_connect(endpoints_, [self = shared_from_this()](const boost::system::error_code& ec, const tcp::endpoint&) {
    if (ec) return self->Finish(absl::StrCat("connect: ", ec.message()));
    boost::system::error_code ignored;
    self->stream_.socket().set_option(tcp::no_delay(true), ignored);
    self->connected_ = true;
    self->Write();
  });
}

void StreamConnection::Write() {
  http::async_write(stream_, request_, [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
    if (ec) {
      if (self->RetryOnFreshConnection()) return;
      return self->Finish(absl::StrCat("write: ", ec.message()));
    }
    self->ReadHeader();
  });
}

bool StreamConnection::RetryOnFreshConnection() {
  if (!reused_ || retried_ || result_.http_status != 0) return false;
  retried_ = true;
  reused_ = false;
  boost::system::error_code ignored;
  stream_.socket().close(ignored);
  connected_ = false;
  read_buffer_.clear();
  Connect();
  return true;
}

void StreamConnection::ReadHeader() {
  parser_.emplace();
  parser_->body_limit(boost::none);
  scanner_ = SseScanner{};
  http::async_read_header(stream_, read_buffer_, *parser_, [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
    if (ec) {
      if (self->RetryOnFreshConnection()) return;
      return self->Finish(absl::StrCat("read header: ", ec.message()));
    }
    self->result_.http_status = static_cast<int>(self->parser_->get().result_int());
    if (self->parser_->is_done()) return self->Finish("");
    self->ReadBody();
  });
}

void StreamConnection::ReadBody() {
  parser_->get().body().data = body_chunk_.data();
  parser_->get().body().size = body_chunk_.size();
  http::async_read_some(stream_, read_buffer_, *parser_, [self = shared_from_this()](boost::system::error_code ec, size_t) {
    if (ec == http::error::need_buffer) ec = {};
    if (ec) return self->Finish(absl::StrCat("read body: ", ec.message()));
    self->OnBodyBytes(self->body_chunk_.size() - self->parser_->get().body().size);
    if (self->parser_->is_done()) return self->Finish("");
    self->ReadBody();
  });
}

void StreamConnection::OnBodyBytes(size_t n) {
  if (n == 0) return;
  const std::string_view bytes(body_chunk_.data(), n);
  if (result_.http_status != 200) {
    if (error_body_.size() < 4096) error_body_.append(bytes);
    return;
  }
  const auto now = BenchClock::now();
  scanner_.Feed(bytes, [&](const SseEvent& event) {
    if (event.completion_tokens) usage_completion_tokens_ = event.completion_tokens;
    if (event.prompt_tokens) usage_prompt_tokens_ = event.prompt_tokens;
    switch (event.kind) {
      case SseEvent::Kind::kContent:
        if (result_.content_chunks == 0) result_.ttft_s = Seconds(now - sent_);
        else result_.itl_s.push_back(Seconds(now - last_chunk_));
        last_chunk_ = now;
        ++result_.content_chunks;
        break;
      case SseEvent::Kind::kError:
        if (event_error_.empty()) event_error_ = event.error_message;
        break;
      case SseEvent::Kind::kDone:
      case SseEvent::Kind::kOther:
        break;
    }
  });
}

void StreamConnection::Finish(const std::string& error) {
  result_.done = true;
  result_.latency_s = Seconds(BenchClock::now() - sent_);
  result_.output_tokens = usage_completion_tokens_.value_or(result_.content_chunks);
  result_.prompt_tokens = usage_prompt_tokens_.value_or(0);
  if (!error.empty()) result_.error = error;
  else if (result_.http_status != 200) result_.error = ErrorMessage(result_.http_status, error_body_);
  else if (!event_error_.empty()) result_.error = absl::StrCat("error event: ", event_error_);
  else if (result_.content_chunks == 0) result_.error = "the stream carried no text";
  result_.success = result_.error.empty();
  const bool keep = error.empty() && parser_ && parser_->is_done() && parser_->get().keep_alive();
  if (!keep) {
    boost::system::error_code ignored;
    stream_.socket().close(ignored);
    connected_ = false;
    read_buffer_.clear();
  }
  (*plan_->results)[static_cast<size_t>(index_)] = std::move(result_);
  ClaimNext();
}

}  // namespace ernie::bench
