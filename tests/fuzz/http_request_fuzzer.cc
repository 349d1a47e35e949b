// Fuzz target: an HTTP request as the gateway reads it off a connection
// (gateway/http/request_reader.h: Beast's parser under the server's limits,
// then the conversion routes see) and, for the two generation routes, the
// JSON body through the OpenAI request validation.
//
// Input: the raw bytes a client sends. The seeds are real requests (curl
// and the openai SDK's framing: chunked and Content-Length bodies).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "fuzz_check.h"
#include "gateway/http/request_reader.h"
#include "gateway/openai/chat_request.h"
#include "gateway/openai/completion_request.h"

namespace {

// Small limits, so the fuzzer reaches the 413 and 431 answers too.
constexpr size_t kMaxHeaderBytes = 2048;
constexpr size_t kMaxBodyBytes = 4096;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ernie::gateway;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto parsed = ParseHttpRequest(bytes, kMaxHeaderBytes, kMaxBodyBytes);
  if (auto* error = std::get_if<HttpReadError>(&parsed)) {
    ERNIE_FUZZ_CHECK(error->status == 400 || error->status == 413 || error->status == 431, "a 4xx answer");
    return 0;
  }
  const HttpRequest& request = std::get<HttpRequest>(parsed);
  ERNIE_FUZZ_CHECK(request.body.size() <= kMaxBodyBytes, "the body limit holds");
  ERNIE_FUZZ_CHECK(request.target.compare(0, request.path.size(), request.path) == 0, "path prefixes target");
  for (const auto& [name, value] : request.headers) {
    for (char c : name) ERNIE_FUZZ_CHECK(!(c >= 'A' && c <= 'Z'), "header names lowercased");
  }
  if (request.path != "/v1/chat/completions" && request.path != "/v1/completions") return 0;
  Json body;
  if (ParseJsonObject(request.body, &body)) return 0;  // a 400 naming the body
  const GenerationLimits limits{.vocab_size = 1002};
  if (request.path == "/v1/chat/completions") {
    (void)ParseChatCompletionRequest(body, limits);
  } else {
    (void)ParseCompletionRequest(body, limits);
  }
  return 0;
}
