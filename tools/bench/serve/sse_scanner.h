// Splits a Server-Sent Events byte stream into events and classifies each
// OpenAI streaming payload cheaply: at 100k+ events/s the benchmark client
// must not cost the server its CPU, so only the rare usage and error events
// are parsed as JSON; content events are recognised by a key scan.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ernie::bench {

struct SseEvent {
  enum class Kind {
    kContent,  // a chunk carrying non-empty text ("content" or "text")
    kOther,    // role-only, empty or finish-only chunks
    kDone,     // data: [DONE]
    kError,    // {"error": ...} or {"object": "error"}
  };
  Kind kind = Kind::kOther;
  std::optional<int> completion_tokens;  // from a "usage" object when the chunk has one
  std::optional<int> prompt_tokens;
  std::string error_message;             // kError: the server's message
};

class SseScanner {
 public:
  // Feeds bytes; calls `on_event(const SseEvent&)` for every complete event.
  template <typename OnEvent>
  void Feed(std::string_view bytes, OnEvent&& on_event) {
    pending_.append(bytes);
    size_t start = 0;
    while (true) {
      const size_t end = pending_.find("\n\n", start);
      if (end == std::string::npos) break;
      if (auto event = Classify(std::string_view(pending_).substr(start, end - start))) on_event(*event);
      start = end + 2;
    }
    pending_.erase(0, start);
  }

  // One event block (lines without the blank separator); nullopt for a
  // comment or an event without data lines.
  static std::optional<SseEvent> Classify(std::string_view block);

 private:
  std::string pending_;  // bytes after the last complete event
};

}  // namespace ernie::bench
