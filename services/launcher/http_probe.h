// A minimal blocking HTTP/1.1 GET against a loopback server, for readiness
// checks (the launcher waits for the gateway's /ready).
#pragma once

#include <string>
#include <vector>

namespace ernie::launcher {

// Returns the status code, or 0 when the server cannot be reached in `timeout_ms`.
int HttpGetStatus(const std::string& host, int port, const std::string& path, int timeout_ms);

// A TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read, close).
int PickFreePort();

// `count` distinct such ports (all bound at once, then closed); empty when
// the system would not give that many.
std::vector<int> PickFreePorts(int count);

}  // namespace ernie::launcher
