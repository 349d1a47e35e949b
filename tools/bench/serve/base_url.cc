#include "tools/bench/serve/base_url.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ernie::bench {

std::string BaseUrl::HostHeader() const {
  const bool ipv6 = host.find(':') != std::string::npos;
  return absl::StrCat(ipv6 ? "[" : "", host, ipv6 ? "]" : "", ":", port);
}

absl::StatusOr<BaseUrl> ParseBaseUrl(const std::string& url) {
  constexpr absl::string_view kScheme = "http://";
  if (absl::StartsWith(url, "https://"))
    return absl::InvalidArgumentError(absl::StrCat("--base-url ", url, ": https is not supported (use plain http)"));
  if (!absl::StartsWith(url, kScheme))
    return absl::InvalidArgumentError(absl::StrCat("--base-url ", url, ": expected http://HOST[:PORT][/PREFIX]"));
  const std::string rest = url.substr(kScheme.size());
  const size_t slash = rest.find('/');
  const std::string authority = rest.substr(0, slash);
  BaseUrl out;
  out.path_prefix = slash == std::string::npos ? "" : rest.substr(slash);
  while (absl::EndsWith(out.path_prefix, "/")) out.path_prefix.pop_back();
  // Accept OpenAI-style base URLs that already end in /v1: routes are added back per endpoint.
  if (absl::EndsWith(out.path_prefix, "/v1")) out.path_prefix.resize(out.path_prefix.size() - 3);
  std::string port_text;
  if (absl::StartsWith(authority, "[")) {
    const size_t close = authority.find(']');
    if (close == std::string::npos)
      return absl::InvalidArgumentError(absl::StrCat("--base-url ", url, ": unclosed '[' in the host"));
    out.host = authority.substr(1, close - 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':')
        return absl::InvalidArgumentError(absl::StrCat("--base-url ", url, ": expected ':' after ']'"));
      port_text = authority.substr(close + 2);
    }
  } else {
    const size_t colon = authority.rfind(':');
    out.host = authority.substr(0, colon);
    if (colon != std::string::npos) port_text = authority.substr(colon + 1);
  }
  if (out.host.empty()) return absl::InvalidArgumentError(absl::StrCat("--base-url ", url, ": no host"));
  int port = 80;
  if (!port_text.empty() && (!absl::SimpleAtoi(port_text, &port) || port < 1 || port > 65535))
    return absl::InvalidArgumentError(absl::StrCat("--base-url ", url, ": port '", port_text, "' is not in [1, 65535]"));
  out.port = std::to_string(port);
  return out;
}

}  // namespace ernie::bench
