// What one benchmark request measured, as a client sees it.
#pragma once

#include <string>
#include <vector>

namespace ernie::bench {

struct RequestResult {
  bool done = false;          // the request ran (succeeded or failed)
  bool success = false;
  int http_status = 0;        // 0: no response head arrived
  std::string error;          // why it failed (transport error, HTTP error body, error event)
  double ttft_s = 0;          // request sent -> first non-empty text chunk
  double latency_s = 0;       // request sent -> end of the response
  std::vector<double> itl_s;  // gaps between consecutive text chunks
  int content_chunks = 0;     // SSE events that carried text
  int output_tokens = 0;      // usage.completion_tokens when reported, else content_chunks
  int prompt_tokens = 0;      // usage.prompt_tokens when reported, else 0
};

}  // namespace ernie::bench
