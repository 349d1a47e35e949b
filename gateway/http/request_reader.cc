#include "gateway/http/request_reader.h"

#include <cstdint>
#include <utility>

#include "absl/strings/ascii.h"
#include "boost/beast/http/error.hpp"
#include "boost/beast/http/parser.hpp"

namespace ernie::gateway {

namespace http = boost::beast::http;

HttpRequest ToHttpRequest(http::request<http::string_body>&& message) {
  HttpRequest request;
  request.method = std::string(message.method_string());
  request.target = std::string(message.target());
  const size_t query = request.target.find('?');
  request.path = request.target.substr(0, query);
  for (const auto& field : message) {
    request.headers.emplace_back(absl::AsciiStrToLower(std::string(field.name_string())),
                                 std::string(field.value()));
  }
  request.keep_alive = message.keep_alive();
  request.body = std::move(message.body());
  return request;
}

std::variant<HttpRequest, HttpReadError> ParseHttpRequest(std::string_view bytes, size_t max_header_bytes,
                                                          size_t max_body_bytes) {
  http::request_parser<http::string_body> parser;
  parser.eager(true);  // the body in the same put() as the header, as a socket read would deliver it
  parser.body_limit(max_body_bytes);
  parser.header_limit(static_cast<std::uint32_t>(max_header_bytes));
  boost::beast::error_code ec;
  size_t used = 0;
  // put() consumes what it can and says need_more (or consumes nothing)
  // when the rest of the message is not there yet. Beast's contract is that
  // the next put() then brings new bytes (its chunked parser asserts it);
  // here none will come, so need_more or no progress is the end of the
  // stream.
  while (!parser.is_done()) {
    const size_t n = parser.put(boost::asio::buffer(bytes.data() + used, bytes.size() - used), ec);
    used += n;
    const bool wants_more = ec == http::error::need_more;
    if (wants_more) ec = {};
    if (ec) break;
    if (wants_more || n == 0) {  // the rest of the message is not in `bytes`
      if (parser.got_some()) {
        parser.put_eof(ec);
      } else {
        ec = http::error::partial_message;  // not a byte of a request
      }
      break;
    }
  }
  if (!ec && !parser.is_done()) ec = http::error::partial_message;
  if (ec == http::error::body_limit) return HttpReadError{413, "request body too large"};
  if (ec == http::error::header_limit) return HttpReadError{431, "request headers too large"};
  if (ec) return HttpReadError{400, "malformed HTTP request"};
  return ToHttpRequest(parser.release());
}

}  // namespace ernie::gateway
