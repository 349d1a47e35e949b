// A benchmark flag's comma-separated list of positive integers ("1,16,64"),
// each at most `max`: the --ms / --batch-sizes flags of the CUDA benchmarks.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace ernie::bench {

// Replaces *out with the list; false (and *out unspecified) on an empty,
// non-numeric, non-positive or too large entry.
template <typename Int>
bool ParsePositiveIntList(absl::string_view text, std::vector<Int>* out,
                          Int max = std::numeric_limits<Int>::max()) {
  out->clear();
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    Int value = 0;
    if (!absl::SimpleAtoi(part, &value) || value <= 0 || value > max) return false;
    out->push_back(value);
  }
  return true;
}

}  // namespace ernie::bench
