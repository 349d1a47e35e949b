#include "engine/kv/block_hash.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace ernie::kv {
namespace {

void AppendWord(std::vector<uint8_t>& bytes, uint64_t word) {
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<uint8_t>(word >> (8 * i)));
}

TEST(BlockHashTest, IsSipHashOfTheDocumentedSerialisation) {
  const BlockHash parent{.lo = 0x1111, .hi = 0x2222};
  const BlockHash extra{.lo = 0x3333, .hi = 0x4444};
  const std::vector<int32_t> tokens = {5, -1, 103423};  // odd count: one padded word

  std::vector<uint8_t> bytes;
  AppendWord(bytes, parent.lo);
  AppendWord(bytes, parent.hi);
  AppendWord(bytes, extra.lo);
  AppendWord(bytes, extra.hi);
  AppendWord(bytes, 3);
  AppendWord(bytes, 5ULL | (0xffffffffULL << 32));
  AppendWord(bytes, 103423ULL);
  const SipHash128Tag expected = SipHash128(kDefaultPrefixHashKey, bytes);

  const BlockHash hash = HashBlockTokens(kDefaultPrefixHashKey, parent, extra, tokens);
  EXPECT_EQ(hash.lo, expected.lo);
  EXPECT_EQ(hash.hi, expected.hi);
}

TEST(BlockHashTest, GoldenValuePinsTheLayout) {
  // If this changes, every persisted or exported block id changes: bump
  // kBlockHashVersion and update the value deliberately.
  const std::vector<int32_t> tokens = {1, 2, 3, 4};
  EXPECT_EQ(HashBlockTokens(kDefaultPrefixHashKey, kRootBlockHash, kNoExtraKey, tokens).ToHex(),
            "7952b368cff75ef58114f20d724fdb35");
}

TEST(BlockHashTest, EveryInputChangesTheHash) {
  const std::vector<int32_t> tokens = {7, 8, 9, 10};
  const BlockHash base = HashBlockTokens(kDefaultPrefixHashKey, kRootBlockHash, kNoExtraKey, tokens);
  EXPECT_EQ(base, HashBlockTokens(kDefaultPrefixHashKey, kRootBlockHash, kNoExtraKey, tokens));

  const BlockHash other_parent{.lo = 1, .hi = 0};
  EXPECT_NE(base, HashBlockTokens(kDefaultPrefixHashKey, other_parent, kNoExtraKey, tokens));
  const BlockHash lora = MakeExtraKey(kDefaultPrefixHashKey, {'l', 'o', 'r', 'a'});
  EXPECT_NE(lora, kNoExtraKey);
  EXPECT_NE(base, HashBlockTokens(kDefaultPrefixHashKey, kRootBlockHash, lora, tokens));
  EXPECT_NE(base, HashBlockTokens(kDefaultPrefixHashKey, kRootBlockHash, kNoExtraKey,
                                  std::vector<int32_t>{7, 8, 10, 9}));
  EXPECT_NE(base, HashBlockTokens(SipHashKey{1, 2}, kRootBlockHash, kNoExtraKey, tokens));
  // Zero padding never aliases a real trailing token 0.
  EXPECT_NE(HashBlockTokens(kDefaultPrefixHashKey, kRootBlockHash, kNoExtraKey,
                            std::vector<int32_t>{7, 8, 9}),
            HashBlockTokens(kDefaultPrefixHashKey, kRootBlockHash, kNoExtraKey,
                            std::vector<int32_t>{7, 8, 9, 0}));
}

TEST(BlockHashTest, ToHexIsHiThenLo) {
  EXPECT_EQ((BlockHash{.lo = 0xabc, .hi = 0x1}).ToHex(), "00000000000000010000000000000abc");
}

}  // namespace
}  // namespace ernie::kv
