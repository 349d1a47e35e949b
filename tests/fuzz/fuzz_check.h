// What a fuzz target asserts beyond "does not crash": a property that must
// hold for every input. A failed check prints why and aborts, which
// libFuzzer reports as a crash and saves the input.
#pragma once

#include <cstdio>
#include <cstdlib>

#define ERNIE_FUZZ_CHECK(condition, what)                                         \
  do {                                                                            \
    if (!(condition)) {                                                           \
      std::fprintf(stderr, "%s:%d: fuzz check failed: %s (%s)\n", __FILE__,       \
                   __LINE__, #condition, what);                                   \
      std::abort();                                                               \
    }                                                                             \
  } while (0)
