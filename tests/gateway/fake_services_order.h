// The test thread and the fake services' handlers meet only through the
// gateway's gRPC calls, which gRPC orders in its core library, built without
// ThreadSanitizer: without help TSan reports the test's script (set before a
// request) and the fakes' records (read after the answer) as races. One key
// for all of them (services/common/grpc_handoff.h): the HTTP test client
// hands over before each send and takes over after each read; each fake
// handler takes over on entry and hands over on return.
#pragma once

#include "services/common/grpc_handoff.h"

namespace ernie::gateway::testing {

inline const char kFakeServicesOrder = 0;  // its address is the key

// For the body of a fake handler.
struct FakeHandlerScope {
  FakeHandlerScope() { TakeFromGrpc(&kFakeServicesOrder); }
  ~FakeHandlerScope() { HandToGrpc(&kFakeServicesOrder); }
  FakeHandlerScope(const FakeHandlerScope&) = delete;
  FakeHandlerScope& operator=(const FakeHandlerScope&) = delete;
};

}  // namespace ernie::gateway::testing
