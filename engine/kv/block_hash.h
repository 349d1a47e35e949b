// Identity of a FULL KV block for automatic prefix caching.
//
// A block's hash is chained: it covers the parent block's hash (the block
// before it in the same sequence), an extra key, and the block's token ids.
// So equal hashes mean equal *whole prefixes*, not just equal 16 tokens, and
// a lookup walks a prompt block by block until the first miss.
//
// Serialisation fed to SipHash-2-4-128, as little-endian 64-bit words:
//   parent.lo, parent.hi, extra.lo, extra.hi, number of tokens,
//   tokens packed two per word (even index in the low half), zero padded.
// The token count is hashed so padding cannot alias a real token 0.
// Changing this layout changes every block id: bump kBlockHashVersion.
//
// Thread-safety: free functions over values; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "absl/types/span.h"
#include "engine/kv/siphash.h"

namespace ernie::kv {

inline constexpr int kBlockHashVersion = 1;

// 128 bits of SipHash output. Also used for the extra key slot.
struct BlockHash {
  uint64_t lo = 0;
  uint64_t hi = 0;

  friend bool operator==(const BlockHash&, const BlockHash&) = default;

  // For absl::flat_hash_map keys (in-process only; the value itself is the
  // stable identity).
  template <typename H>
  friend H AbslHashValue(H state, const BlockHash& hash) {
    return H::combine(std::move(state), hash.lo, hash.hi);
  }

  // 32 lowercase hex digits, hi then lo (for logs and KV events).
  std::string ToHex() const;
};

// Parent of the first block of every sequence.
inline constexpr BlockHash kRootBlockHash{};

// Extra key of a plain text request. Callers that need to separate caches
// (a LoRA adapter, multimodal inputs, a per-tenant cache salt) fold those
// into one BlockHash with MakeExtraKey and pass it for every block.
inline constexpr BlockHash kNoExtraKey{};

// The key used when the deployment configures none: fixed, so hashes agree
// across processes and restarts. A deployment that accepts prompts from
// untrusted parties and wants crafted collisions to be infeasible sets its
// own secret key (KvCacheManagerOptions::prefix_hash_key).
inline constexpr SipHashKey kDefaultPrefixHashKey{0x65726e6965736572ULL,  // "ernieser"
                                                  0x76652d6b762d7631ULL};  // "ve-kv-v1"

// Hash of one full block of `tokens` following `parent`.
BlockHash HashBlockTokens(const SipHashKey& key, const BlockHash& parent,
                          const BlockHash& extra_key, absl::Span<const int32_t> tokens);

// Folds arbitrary bytes (e.g. "lora:<name>" or an image digest) into an
// extra key. Never returns kNoExtraKey for non-empty input in practice.
BlockHash MakeExtraKey(const SipHashKey& key, absl::Span<const uint8_t> bytes);

}  // namespace ernie::kv
