// Server-Sent Events framing as OpenAI writes it: each event is one line
// "data: <payload>" followed by a blank line; the stream ends with
// "data: [DONE]".
#pragma once

#include <string>
#include <string_view>

namespace ernie::gateway {

// One event carrying `payload` (a JSON document without newlines; any
// newline inside would be split into several data lines, which SSE joins).
std::string SseEvent(std::string_view payload);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";
inline constexpr std::string_view kSseContentType = "text/event-stream";

}  // namespace ernie::gateway
