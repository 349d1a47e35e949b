// Which worker last served a prompt prefix: a hint for the next request
// with that prefix, whose KV blocks are likely still in that worker's prefix
// cache (worker_choice.h weighs it against load).
//
// A fixed table allocated once: a key maps to one slot and a newer key
// overwrites whatever the slot held, so memory never grows with traffic. The
// unordered_map it replaces added ~100 bytes a new prefix until 65,536
// entries and then dropped them all at once; in the instant-backend soak
// that was the gateway's remaining growth (0.43 MB in 15 minutes after
// warm-up) and a periodic loss of every hint. A lost hint costs one prefill.
//
// Thread-safety: none; WorkerPool's mutex guards it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace ernie::gateway {

class PrefixAffinityTable {
 public:
  // 2^capacity_log2 slots of 16 bytes (the default: 65,536, 1 MiB).
  explicit PrefixAffinityTable(int capacity_log2 = 16);

  void Record(uint64_t prefix_key, uint32_t worker_id);
  // The worker last recorded for the key, unless a later key took its slot.
  std::optional<uint32_t> Find(uint64_t prefix_key) const;
  size_t capacity() const { return slots_.size(); }

 private:
  struct Slot {
    uint64_t key = 0;
    uint32_t worker_id = 0;
    bool used = false;
  };
  size_t SlotOf(uint64_t key) const;

  std::vector<Slot> slots_;
  int shift_;  // 64 - capacity_log2: the top bits of the mixed key pick the slot
};

}  // namespace ernie::gateway
