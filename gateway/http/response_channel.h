// How a route answers: one complete response, or a stream of chunks (SSE).
// Every method is thread-safe and non-blocking (gRPC callback threads call
// them); the connection does the writing on its own strand.
#pragma once

#include <cstddef>
#include <functional>

#include "gateway/http/http_message.h"

namespace ernie::gateway {

class ResponseChannel {
 public:
  virtual ~ResponseChannel() = default;

  // A complete response. At most one of Respond / StartStream per request;
  // later calls are ignored.
  virtual void Respond(HttpResponse response) = 0;

  // Starts a chunked response with `head`'s status and headers; then any
  // number of Send, then End. Send and End before StartStream are ignored.
  virtual void StartStream(HttpResponse head) = 0;
  virtual void Send(std::string data) = 0;
  virtual void End() = 0;

  // `on_closed` runs once if the connection dies before the response has
  // been fully written (client gone, write timeout, buffer overflow), at
  // once when it is already dead. The route cancels its upstream work there.
  virtual void SetOnClosed(std::function<void()> on_closed) = 0;

  // Bytes accepted but not yet written to the socket.
  virtual size_t buffered_bytes() const = 0;
  // Whether buffered_bytes is above the high-water mark (a slow reader):
  // the producer should pause and wait for WhenWritable.
  virtual bool congested() const = 0;
  // Runs `resume` once the buffer drained below the low-water mark, or the
  // connection closed (at once when neither congested nor open).
  virtual void WhenWritable(std::function<void()> resume) = 0;

  // Whether the connection is gone.
  virtual bool closed() const = 0;
};

}  // namespace ernie::gateway
