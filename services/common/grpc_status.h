// absl::Status <-> grpc::Status. The canonical codes are numbered alike.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace ernie::services {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace ernie::services
