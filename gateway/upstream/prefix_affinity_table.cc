#include "gateway/upstream/prefix_affinity_table.h"

namespace ernie::gateway {

PrefixAffinityTable::PrefixAffinityTable(int capacity_log2)
    : slots_(size_t{1} << capacity_log2), shift_(64 - capacity_log2) {}

size_t PrefixAffinityTable::SlotOf(uint64_t key) const {
  // Fibonacci hashing: the keys are hashes already, but nothing promises
  // their low bits are the well-mixed ones.
  return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
}

void PrefixAffinityTable::Record(uint64_t prefix_key, uint32_t worker_id) {
  slots_[SlotOf(prefix_key)] = Slot{.key = prefix_key, .worker_id = worker_id, .used = true};
}

std::optional<uint32_t> PrefixAffinityTable::Find(uint64_t prefix_key) const {
  const Slot& slot = slots_[SlotOf(prefix_key)];
  if (!slot.used || slot.key != prefix_key) return std::nullopt;
  return slot.worker_id;
}

}  // namespace ernie::gateway
