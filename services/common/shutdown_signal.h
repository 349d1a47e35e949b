// Clean shutdown on SIGINT / SIGTERM without async-signal handlers: block
// the signals in every thread (call before starting any), then wait for one
// synchronously on the main thread and shut the server down there.
#pragma once

namespace ernie::services {

// Blocks SIGINT and SIGTERM in the calling thread and every thread it starts later.
void BlockShutdownSignals();

// Waits until SIGINT or SIGTERM arrives; returns its number.
int WaitForShutdownSignal();

}  // namespace ernie::services
