#include "engine/kv/block_hash.h"

#include "absl/strings/str_format.h"

namespace ernie::kv {

std::string BlockHash::ToHex() const { return absl::StrFormat("%016x%016x", hi, lo); }

BlockHash HashBlockTokens(const SipHashKey& key, const BlockHash& parent,
                          const BlockHash& extra_key, absl::Span<const int32_t> tokens) {
  SipHasher128 hasher(key);
  hasher.AddWord(parent.lo);
  hasher.AddWord(parent.hi);
  hasher.AddWord(extra_key.lo);
  hasher.AddWord(extra_key.hi);
  hasher.AddWord(static_cast<uint64_t>(tokens.size()));
  size_t i = 0;
  for (; i + 2 <= tokens.size(); i += 2) {
    hasher.AddWord(static_cast<uint64_t>(static_cast<uint32_t>(tokens[i])) |
                   (static_cast<uint64_t>(static_cast<uint32_t>(tokens[i + 1])) << 32));
  }
  if (i < tokens.size()) hasher.AddWord(static_cast<uint32_t>(tokens[i]));
  const SipHash128Tag tag = hasher.Finish();
  return BlockHash{.lo = tag.lo, .hi = tag.hi};
}

BlockHash MakeExtraKey(const SipHashKey& key, absl::Span<const uint8_t> bytes) {
  const SipHash128Tag tag = SipHash128(key, bytes);
  return BlockHash{.lo = tag.lo, .hi = tag.hi};
}

}  // namespace ernie::kv
