// SipHash-2-4 with a 128-bit tag (Aumasson & Bernstein, reference at
// github.com/veorq/SipHash), written for the prefix cache's block identities.
//
// Why SipHash: the block hash must be the same in every process and on every
// run (absl::Hash is seeded per process), and two different token blocks must
// practically never share an id, because a collision would hand one request
// another request's KV. A 128-bit tag makes accidental collisions
// practically impossible (birthday bound ~2^64 blocks); with a secret key it
// also resists collisions crafted by someone who can choose prompts.
//
// Thread-safety: a SipHasher128 is a plain value; use one per thread.
#pragma once

#include <cstdint>

#include "absl/types/span.h"

namespace ernie::kv {

// The 128-bit key, as the two little-endian 64-bit halves of the 16 key bytes.
struct SipHashKey {
  uint64_t k0 = 0;
  uint64_t k1 = 0;
};

// A 128-bit tag: `lo` is the first 8 output bytes read little-endian, `hi`
// the last 8 (so the reference test vectors compare byte for byte).
struct SipHash128Tag {
  uint64_t lo = 0;
  uint64_t hi = 0;
};

// Incremental SipHash-2-4-128 over a message fed as 64-bit little-endian
// words (the hot path: block hashing always feeds whole words) and an
// optional tail of fewer than 8 bytes given to Finish.
class SipHasher128 {
 public:
  explicit SipHasher128(const SipHashKey& key);

  // Absorbs the next 8 message bytes, `word` in little-endian byte order.
  void AddWord(uint64_t word);

  // Absorbs the last `tail_length` (< 8) bytes, packed little-endian in
  // `tail`, and returns the tag. The hasher must not be used afterwards.
  SipHash128Tag Finish(uint64_t tail = 0, int tail_length = 0);

 private:
  void Round();

  uint64_t v0_, v1_, v2_, v3_;  // the four lanes of SipHash state
  uint64_t num_bytes_ = 0;      // message length so far (enters the last word)
};

// One-shot SipHash-2-4-128 of arbitrary bytes (used by tests against the
// reference vectors, and for hashing free-form extra keys).
SipHash128Tag SipHash128(const SipHashKey& key, absl::Span<const uint8_t> bytes);

}  // namespace ernie::kv
