// An error as the OpenAI API reports it: an HTTP status plus
// {"error": {"message", "type", "param", "code"}}.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace ernie::gateway {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";  // OpenAI's error type
  std::optional<std::string> param;            // the offending field, e.g. "messages[1].role"
  std::optional<std::string> code;             // e.g. "model_not_found"
  std::optional<int> retry_after_seconds;      // 429: written as Retry-After

  nlohmann::json ToJson() const;
  std::string ToJsonString() const { return ToJson().dump(); }
};

// 400 invalid_request_error naming `param`.
ApiError BadField(std::string param, std::string message);
ApiError NotFound(std::string message, std::optional<std::string> code = std::nullopt);
ApiError Unauthorized();
ApiError MethodNotAllowed(std::string_view method, std::string_view path);
ApiError ServiceUnavailable(std::string message);
ApiError InternalError(std::string message);

// The type OpenAI uses for a status: 400s are invalid_request_error (401
// authentication_error, 404 not_found_error, 429 rate_limit_error), 5xx
// server errors.
std::string ErrorTypeForStatus(int status);

}  // namespace ernie::gateway
