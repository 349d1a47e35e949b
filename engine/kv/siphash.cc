#include "engine/kv/siphash.h"

#include <bit>

namespace ernie::kv {

SipHasher128::SipHasher128(const SipHashKey& key)
    : v0_(key.k0 ^ 0x736f6d6570736575ULL),
      v1_(key.k1 ^ 0x646f72616e646f6dULL ^ 0xee),  // 0xee selects the 128-bit variant
      v2_(key.k0 ^ 0x6c7967656e657261ULL),
      v3_(key.k1 ^ 0x7465646279746573ULL) {}

void SipHasher128::Round() {
  v0_ += v1_;
  v1_ = std::rotl(v1_, 13);
  v1_ ^= v0_;
  v0_ = std::rotl(v0_, 32);
  v2_ += v3_;
  v3_ = std::rotl(v3_, 16);
  v3_ ^= v2_;
  v0_ += v3_;
  v3_ = std::rotl(v3_, 21);
  v3_ ^= v0_;
  v2_ += v1_;
  v1_ = std::rotl(v1_, 17);
  v1_ ^= v2_;
  v2_ = std::rotl(v2_, 32);
}

void SipHasher128::AddWord(uint64_t word) {
  v3_ ^= word;
  Round();  // two compression rounds: the "2" of SipHash-2-4
  Round();
  v0_ ^= word;
  num_bytes_ += 8;
}

SipHash128Tag SipHasher128::Finish(uint64_t tail, int tail_length) {
  const uint64_t total = num_bytes_ + static_cast<uint64_t>(tail_length);
  const uint64_t last = (total << 56) | tail;
  v3_ ^= last;
  Round();
  Round();
  v0_ ^= last;

  SipHash128Tag tag;
  v2_ ^= 0xee;
  for (int i = 0; i < 4; ++i) Round();  // four finalisation rounds: the "4"
  tag.lo = v0_ ^ v1_ ^ v2_ ^ v3_;
  v1_ ^= 0xdd;
  for (int i = 0; i < 4; ++i) Round();
  tag.hi = v0_ ^ v1_ ^ v2_ ^ v3_;
  return tag;
}

SipHash128Tag SipHash128(const SipHashKey& key, absl::Span<const uint8_t> bytes) {
  SipHasher128 hasher(key);
  size_t offset = 0;
  for (; offset + 8 <= bytes.size(); offset += 8) {
    uint64_t word = 0;
    for (int i = 0; i < 8; ++i) word |= static_cast<uint64_t>(bytes[offset + i]) << (8 * i);
    hasher.AddWord(word);
  }
  uint64_t tail = 0;
  const int tail_length = static_cast<int>(bytes.size() - offset);
  for (int i = 0; i < tail_length; ++i) tail |= static_cast<uint64_t>(bytes[offset + i]) << (8 * i);
  return hasher.Finish(tail, tail_length);
}

}  // namespace ernie::kv
