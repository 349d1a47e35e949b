#include "gateway/openai/api_error.h"

#include "absl/strings/str_cat.h"

namespace ernie::gateway {

nlohmann::json ApiError::ToJson() const {
  nlohmann::json error = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (param) error["param"] = *param;
  if (code) error["code"] = *code;
  return nlohmann::json{{"error", std::move(error)}};
}

std::string ErrorTypeForStatus(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    default: break;
  }
  if (status >= 500) return status == 503 ? "service_unavailable_error" : "server_error";
  return "invalid_request_error";
}

ApiError BadField(std::string param, std::string message) {
  return ApiError{.status = 400, .message = std::move(message), .param = std::move(param)};
}

ApiError NotFound(std::string message, std::optional<std::string> code) {
  return ApiError{.status = 404, .message = std::move(message), .type = ErrorTypeForStatus(404), .code = std::move(code)};
}

ApiError Unauthorized() {
  return ApiError{.status = 401,
                  .message = "Incorrect or missing API key: send 'Authorization: Bearer <key>'",
                  .type = ErrorTypeForStatus(401),
                  .code = "invalid_api_key"};
}

ApiError MethodNotAllowed(std::string_view method, std::string_view path) {
  return ApiError{.status = 405, .message = absl::StrCat("Method ", std::string(method), " is not allowed for ", std::string(path))};
}

ApiError ServiceUnavailable(std::string message) {
  // Retry-After: a 503 is temporary here (starting, restarting, draining).
  return ApiError{.status = 503, .message = std::move(message), .type = ErrorTypeForStatus(503), .retry_after_seconds = 1};
}

ApiError InternalError(std::string message) {
  return ApiError{.status = 500, .message = std::move(message), .type = ErrorTypeForStatus(500)};
}

}  // namespace ernie::gateway
