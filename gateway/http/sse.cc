#include "gateway/http/sse.h"

namespace ernie::gateway {

std::string SseEvent(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 8);
  size_t start = 0;
  while (true) {
    const size_t newline = payload.find('\n', start);
    out += "data: ";
    out.append(payload.substr(start, newline == std::string_view::npos ? std::string_view::npos : newline - start));
    out += '\n';
    if (newline == std::string_view::npos) break;
    start = newline + 1;
  }
  out += '\n';
  return out;
}

}  // namespace ernie::gateway
