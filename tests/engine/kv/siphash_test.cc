#include "engine/kv/siphash.h"

#include <array>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace ernie::kv {
namespace {

// Key bytes 00..0f and messages 00..(n-1), as in the reference vectors.h of
// github.com/veorq/SipHash (vectors_sip128).
constexpr SipHashKey kReferenceKey{0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL};

std::array<uint8_t, 16> TagBytes(const SipHash128Tag& tag) {
  std::array<uint8_t, 16> bytes{};
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<uint8_t>(tag.lo >> (8 * i));
    bytes[8 + i] = static_cast<uint8_t>(tag.hi >> (8 * i));
  }
  return bytes;
}

std::array<uint8_t, 16> ReferenceTag(int message_length) {
  std::vector<uint8_t> message(static_cast<size_t>(message_length));
  for (int i = 0; i < message_length; ++i) message[i] = static_cast<uint8_t>(i);
  return TagBytes(SipHash128(kReferenceKey, message));
}

TEST(SipHash128Test, MatchesReferenceVectors) {
  // Lengths 0, 1, 7 exercise the tail-only path; 8, 15, 16, 63 whole words
  // plus tails.
  EXPECT_EQ(ReferenceTag(0), (std::array<uint8_t, 16>{0xa3, 0x81, 0x7f, 0x04, 0xba, 0x25, 0xa8,
                                                      0xe6, 0x6d, 0xf6, 0x72, 0x14, 0xc7, 0x55,
                                                      0x02, 0x93}));
  EXPECT_EQ(ReferenceTag(1), (std::array<uint8_t, 16>{0xda, 0x87, 0xc1, 0xd8, 0x6b, 0x99, 0xaf,
                                                      0x44, 0x34, 0x76, 0x59, 0x11, 0x9b, 0x22,
                                                      0xfc, 0x45}));
  EXPECT_EQ(ReferenceTag(7), (std::array<uint8_t, 16>{0xa1, 0xf1, 0xeb, 0xbe, 0xd8, 0xdb, 0xc1,
                                                      0x53, 0xc0, 0xb8, 0x4a, 0xa6, 0x1f, 0xf0,
                                                      0x82, 0x39}));
  EXPECT_EQ(ReferenceTag(8), (std::array<uint8_t, 16>{0x3b, 0x62, 0xa9, 0xba, 0x62, 0x58, 0xf5,
                                                      0x61, 0x0f, 0x83, 0xe2, 0x64, 0xf3, 0x14,
                                                      0x97, 0xb4}));
  EXPECT_EQ(ReferenceTag(15), (std::array<uint8_t, 16>{0x54, 0x93, 0xe9, 0x99, 0x33, 0xb0, 0xa8,
                                                       0x11, 0x7e, 0x08, 0xec, 0x0f, 0x97, 0xcf,
                                                       0xc3, 0xd9}));
  EXPECT_EQ(ReferenceTag(16), (std::array<uint8_t, 16>{0x6e, 0xe2, 0xa4, 0xca, 0x67, 0xb0, 0x54,
                                                       0xbb, 0xfd, 0x33, 0x15, 0xbf, 0x85, 0x23,
                                                       0x05, 0x77}));
  EXPECT_EQ(ReferenceTag(63), (std::array<uint8_t, 16>{0x51, 0x50, 0xd1, 0x77, 0x2f, 0x50, 0x83,
                                                       0x4a, 0x50, 0x3e, 0x06, 0x9a, 0x97, 0x3f,
                                                       0xbd, 0x7c}));
}

TEST(SipHash128Test, WordInterfaceEqualsByteInterface) {
  SipHasher128 hasher(kReferenceKey);
  hasher.AddWord(0x0706050403020100ULL);
  hasher.AddWord(0x0f0e0d0c0b0a0908ULL);
  const SipHash128Tag by_words = hasher.Finish(0x00121110, 3);  // bytes 10 11 12
  EXPECT_EQ(TagBytes(by_words), ReferenceTag(19));
}

}  // namespace
}  // namespace ernie::kv
