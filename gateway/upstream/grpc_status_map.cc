#include "gateway/upstream/grpc_status_map.h"

#include "absl/strings/str_cat.h"

namespace ernie::gateway {

int HttpStatusForGrpcCode(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return 200;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::FAILED_PRECONDITION: return 400;
    case grpc::StatusCode::UNAUTHENTICATED: return 401;
    case grpc::StatusCode::PERMISSION_DENIED: return 403;
    case grpc::StatusCode::NOT_FOUND: return 404;
    case grpc::StatusCode::ALREADY_EXISTS: return 409;
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return 429;
    case grpc::StatusCode::CANCELLED: return 499;
    case grpc::StatusCode::UNIMPLEMENTED: return 501;
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::ABORTED: return 503;
    case grpc::StatusCode::DEADLINE_EXCEEDED: return 504;
    default: return 500;
  }
}

ApiError ApiErrorFromGrpc(const grpc::Status& status, std::string_view service_view) {
  const std::string service(service_view);
  const int http = HttpStatusForGrpcCode(status.error_code());
  ApiError error{.status = http, .type = ErrorTypeForStatus(http)};
  switch (status.error_code()) {
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      error.message = absl::StrCat("The ", service, " is at capacity, retry shortly: ", status.error_message());
      error.retry_after_seconds = 1;
      break;
    case grpc::StatusCode::UNAVAILABLE:
      error.message = absl::StrCat("The ", service, " is unavailable: ", status.error_message());
      error.retry_after_seconds = 1;  // a restarted server is back within seconds
      break;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      error.message = absl::StrCat("The ", service, " did not answer in time: ", status.error_message());
      break;
    default:
      error.message = status.error_message().empty()
                          ? absl::StrCat("The ", service, " failed (gRPC code ", static_cast<int>(status.error_code()), ")")
                          : status.error_message();
  }
  return error;
}

ApiError ApiErrorFromStatus(const absl::Status& status, std::string_view service) {
  // absl and gRPC share the canonical code numbers.
  return ApiErrorFromGrpc(
      grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message())), service);
}

}  // namespace ernie::gateway
