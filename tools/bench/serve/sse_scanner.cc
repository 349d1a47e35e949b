#include "tools/bench/serve/sse_scanner.h"

#include "nlohmann/json.hpp"

namespace ernie::bench {

namespace {

// Position just after `"key":` (and any spaces), or npos.
size_t ValueAfterKey(std::string_view json, std::string_view quoted_key) {
  size_t at = json.find(quoted_key);
  while (at != std::string_view::npos) {
    size_t p = at + quoted_key.size();
    while (p < json.size() && json[p] == ' ') ++p;
    if (p < json.size() && json[p] == ':') {
      ++p;
      while (p < json.size() && json[p] == ' ') ++p;
      return p;
    }
    at = json.find(quoted_key, at + 1);
  }
  return std::string_view::npos;
}

// True when `"key": "<at least one character>"` occurs.
bool HasNonEmptyString(std::string_view json, std::string_view quoted_key) {
  const size_t p = ValueAfterKey(json, quoted_key);
  return p != std::string_view::npos && p + 1 < json.size() && json[p] == '"' && json[p + 1] != '"';
}

}  // namespace

std::optional<SseEvent> SseScanner::Classify(std::string_view block) {
  // Join the event's data lines ("data: x" or "data:x"), ignoring other fields.
  std::string data;
  bool any = false;
  size_t start = 0;
  while (start <= block.size()) {
    size_t end = block.find('\n', start);
    if (end == std::string_view::npos) end = block.size();
    std::string_view line = block.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.starts_with("data:")) {
      line.remove_prefix(5);
      if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
      if (any) data += '\n';
      data.append(line);
      any = true;
    }
    start = end + 1;
  }
  if (!any) return std::nullopt;
  SseEvent event;
  if (data == "[DONE]") {
    event.kind = SseEvent::Kind::kDone;
    return event;
  }
  const std::string_view view(data);
  const size_t object_at = ValueAfterKey(view, "\"object\"");
  const bool error_event = view.starts_with("{\"error\"") ||
                           (object_at != std::string_view::npos && view.substr(object_at).starts_with("\"error\""));
  const size_t usage_at = ValueAfterKey(view, "\"usage\"");
  const bool has_usage = usage_at != std::string_view::npos && usage_at < view.size() && view[usage_at] == '{';
  if (error_event || has_usage) {
    try {
      const auto json = nlohmann::json::parse(data);
      if (error_event) {
        event.kind = SseEvent::Kind::kError;
        const auto& e = json.contains("error") ? json["error"] : json;
        event.error_message = e.is_object() && e.contains("message") && e["message"].is_string()
                                  ? e["message"].get<std::string>()
                                  : data.substr(0, 300);
        return event;
      }
      const auto& usage = json["usage"];
      if (usage.contains("completion_tokens") && usage["completion_tokens"].is_number_integer())
        event.completion_tokens = usage["completion_tokens"].get<int>();
      if (usage.contains("prompt_tokens") && usage["prompt_tokens"].is_number_integer())
        event.prompt_tokens = usage["prompt_tokens"].get<int>();
    } catch (const nlohmann::json::exception& e) {
      event.kind = SseEvent::Kind::kError;
      event.error_message = std::string("unreadable event: ") + e.what();
      return event;
    }
  }
  if (HasNonEmptyString(view, "\"content\"") || HasNonEmptyString(view, "\"text\"")) event.kind = SseEvent::Kind::kContent;
  return event;
}

}  // namespace ernie::bench
