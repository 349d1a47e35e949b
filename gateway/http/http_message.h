// The gateway's view of one HTTP exchange: a parsed request and either a
// complete response or the head of a streamed (chunked) one. Plain values,
// independent of Beast, so routes and tests build them directly.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ernie::gateway {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "POST", ... as sent
  std::string target;  // path and query as sent
  std::string path;    // target without the query string
  HeaderList headers;  // names lowercased, in arrival order
  std::string body;
  bool keep_alive = true;

  // The first header named `name` (lowercase), or "" when absent.
  std::string_view Header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  HeaderList headers;  // extra headers (names as they should be written)
  std::string body;    // ignored for a streamed response's head
};

// "Not Found" for 404 and so on; "Unknown" for a code without a phrase.
std::string_view ReasonPhrase(int status);

// The bytes of a complete response (Content-Length framing).
std::string SerializeResponse(const HttpResponse& response, bool keep_alive);
// The head of a chunked response; each SerializeChunk follows it and
// kLastChunk ends it.
std::string SerializeStreamHead(const HttpResponse& head, bool keep_alive);
std::string SerializeChunk(std::string_view data);
inline constexpr std::string_view kLastChunk = "0\r\n\r\n";

}  // namespace ernie::gateway
