// One generation call to a worker, as a GenerationJob sees it: messages for
// the request's samples, pulled one at a time (the consumer asks for the
// next with ReadNext when it can take it, so a slow HTTP reader slows only
// its own request), then exactly one on_done with the call's status.
// Two kinds: GenerateCall (a Worker.Generate stream of its own) and
// MultiplexedCall (a request on a shared Worker.GenerateMany stream).
#pragma once

#include <functional>
#include <memory>

#include "ernie/v1/worker.pb.h"
#include "grpcpp/support/status.h"

namespace ernie::gateway {

class UpstreamCall : public std::enable_shared_from_this<UpstreamCall> {
 public:
  struct Handlers {
    // A message arrived on `call`; call its ReadNext() for the next one.
    // Must not block. Never runs inside ReadNext or Cancel of the same
    // call, so it may take locks held around them.
    std::function<void(UpstreamCall& call, const ernie::v1::GenerateResponse&)> on_message;
    // The call ended (OK after the last message, or the failure). Runs
    // once, never inside Cancel.
    std::function<void(const grpc::Status&)> on_done;
  };

  virtual ~UpstreamCall() = default;
  virtual void ReadNext() = 0;  // no-op once the call is over
  virtual void Cancel() = 0;    // safe at any time, from any thread
};

}  // namespace ernie::gateway
