// Turning HTTP bytes into an HttpRequest: Beast's parser under the server's
// header and body limits, then the conversion the session dispatches. The
// session reads from a socket; ParseHttpRequest reads from memory, so the
// fuzz target (tests/fuzz/http_request_fuzzer.cc) drives the same code.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <variant>

#include "boost/beast/http/message.hpp"
#include "boost/beast/http/string_body.hpp"
#include "gateway/http/http_message.h"

namespace ernie::gateway {

// A request refused before any route sees it: the status to answer with
// (400 malformed, 413 body too large, 431 headers too large) and why.
struct HttpReadError {
  int status = 400;
  std::string message;
};

// The parsed message as routes see it: header names lowercased, the path
// without the query string, keep-alive as the message asks.
HttpRequest ToHttpRequest(boost::beast::http::request<boost::beast::http::string_body>&& message);

// Parses one request from the start of `bytes` with the given limits.
// Bytes after the request (a pipelined one) are ignored; a request cut
// short is malformed (400).
std::variant<HttpRequest, HttpReadError> ParseHttpRequest(std::string_view bytes, size_t max_header_bytes,
                                                          size_t max_body_bytes);

}  // namespace ernie::gateway
