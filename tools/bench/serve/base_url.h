// The server a benchmark talks to, from a URL such as http://127.0.0.1:8000.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace ernie::bench {

struct BaseUrl {
  std::string host;         // name or address, without brackets
  std::string port;         // "80" when the URL names none
  std::string path_prefix;  // "" or "/something" (never ends with '/'; a trailing "/v1" is dropped)

  // host:port as the Host header wants it.
  std::string HostHeader() const;
};

// Accepts http://HOST[:PORT][/PREFIX]. https is refused (the tool speaks
// plain HTTP/1.1 to loopback or cluster-internal servers).
absl::StatusOr<BaseUrl> ParseBaseUrl(const std::string& url);

}  // namespace ernie::bench
