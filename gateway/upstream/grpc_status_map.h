// The one place where upstream (gRPC / absl) failures become HTTP errors.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "gateway/openai/api_error.h"
#include "grpcpp/support/status.h"

namespace ernie::gateway {

// INVALID_ARGUMENT/OUT_OF_RANGE/FAILED_PRECONDITION 400, UNAUTHENTICATED
// 401, PERMISSION_DENIED 403, NOT_FOUND 404, ALREADY_EXISTS 409,
// RESOURCE_EXHAUSTED 429, CANCELLED 499, UNIMPLEMENTED 501, UNAVAILABLE and
// ABORTED 503, DEADLINE_EXCEEDED 504, everything else 500.
int HttpStatusForGrpcCode(grpc::StatusCode code);

// The error to send for a failed call to `service` ("worker", "tokenizer").
// 429 carries Retry-After: 1 (a full queue drains in about a second).
ApiError ApiErrorFromGrpc(const grpc::Status& status, std::string_view service);
ApiError ApiErrorFromStatus(const absl::Status& status, std::string_view service);

}  // namespace ernie::gateway
