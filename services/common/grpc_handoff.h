// Shows ThreadSanitizer the order gRPC keeps between starting an operation
// and running its callback.
//
// Starting a call, a read, a write or a Finish hands our state to gRPC, and
// the callback of that operation runs later on one of gRPC's threads. gRPC
// orders the two inside its core library, which Debian builds without
// ThreadSanitizer, so TSan cannot see that order and reports every such
// hand-off as a data race between the starting thread and the callback.
// HandToGrpc(key) just before starting an operation and TakeFromGrpc(key)
// first thing in its callback (same key: the call's state) tell TSan what
// gRPC guarantees; nothing else is ordered by them, so a race with any other
// thread is still reported. No-ops outside TSan builds.
#pragma once

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace ernie {

inline void HandToGrpc([[maybe_unused]] const void* key) {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(const_cast<void*>(key));
#endif
}

inline void TakeFromGrpc([[maybe_unused]] const void* key) {
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(const_cast<void*>(key));
#endif
}

}  // namespace ernie
