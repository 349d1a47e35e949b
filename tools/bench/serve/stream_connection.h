// One keep-alive HTTP/1.1 connection of the benchmark client. It claims the
// next request index from the shared plan, waits for that request's arrival
// time, streams the response through an SseScanner while timing every text
// chunk, stores the RequestResult and claims the next one, until the plan is
// exhausted. Asynchronous (Boost.Beast): many connections share one thread;
// every handler runs on its io_context's thread, so a connection needs no locks.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include "tools/bench/serve/base_url.h"
#include "tools/bench/serve/request_result.h"
#include "tools/bench/serve/sse_scanner.h"

namespace ernie::bench {

using BenchClock = std::chrono::steady_clock;

// Shared by every connection of every thread; only `next` changes during a run.
struct RequestPlan {
  BaseUrl url;
  std::string target;                // e.g. "/v1/chat/completions" (prefix included)
  std::string api_key;
  std::vector<std::string> bodies;   // one JSON body per request
  std::vector<double> arrival_s;     // when each request may start, seconds after `start`
  double timeout_s = 600;
  BenchClock::time_point start;
  std::atomic<int> next{0};          // the next request index to claim
  std::vector<RequestResult>* results = nullptr;  // [bodies.size()]; each slot written by one connection
};

class StreamConnection : public std::enable_shared_from_this<StreamConnection> {
 public:
  StreamConnection(boost::asio::io_context& io, RequestPlan* plan, boost::asio::ip::tcp::resolver::results_type endpoints);

  void Start();

 private:
  void ClaimNext();
  void Begin(int index);
  void Connect();
  void Write();
  void ReadHeader();
  void ReadBody();
  void OnBodyBytes(size_t n);
  // A failure before any response byte on a reused connection is the server
  // having closed it: reconnect and send again, once.
  bool RetryOnFreshConnection();
  void Finish(const std::string& error);

  RequestPlan* plan_;
  boost::asio::ip::tcp::resolver::results_type endpoints_;
  boost::beast::tcp_stream stream_;
  boost::asio::steady_timer arrival_timer_;
  boost::beast::flat_buffer read_buffer_;
  std::array<char, 64 * 1024> body_chunk_;  // where the parser puts decoded body bytes
  bool connected_ = false;
  bool reused_ = false;   // this request went out on a connection that had served one before
  bool retried_ = false;

  // The request in flight.
  int index_ = -1;
  BenchClock::time_point sent_, last_chunk_;
  boost::beast::http::request<boost::beast::http::string_body> request_;
  std::optional<boost::beast::http::response_parser<boost::beast::http::buffer_body>> parser_;
  SseScanner scanner_;
  RequestResult result_;
  std::string error_body_;    // body of a non-200 answer, for the message
  std::string event_error_;   // message of an error event
  std::optional<int> usage_completion_tokens_, usage_prompt_tokens_;
};

}  // namespace ernie::bench
