// absl::Status <-> grpc::Status: the canonical codes are the same numbers.
#pragma once

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"

namespace ernie::worker {

inline grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

}  // namespace ernie::worker
