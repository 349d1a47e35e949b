#include "engine/sample/philox.h"

#include <set>

#include <gtest/gtest.h>

namespace ernie {
namespace {

// Known-answer vectors of philox4x32_10 from Random123's kat_vectors.
TEST(PhiloxTest, MatchesRandom123KnownAnswers) {
  EXPECT_EQ(Philox4x32({0, 0, 0, 0}, {0, 0}),
            (std::array<uint32_t, 4>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(Philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, {0xffffffffu, 0xffffffffu}),
            (std::array<uint32_t, 4>{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(Philox4x32({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, {0xa4093822u, 0x299f31d0u}),
            (std::array<uint32_t, 4>{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(PhiloxTest, UniformIsAPureFunctionOfSeedSampleAndPosition) {
  EXPECT_EQ(SamplingUniform(42, 3, 1000), SamplingUniform(42, 3, 1000));
  std::set<double> distinct;
  for (uint64_t seed : {0ull, 1ull, 42ull, 1ull << 40}) {
    for (uint32_t sample : {0u, 1u, 127u}) {
      for (uint64_t position : {0ull, 1ull, 2ull, 1ull << 33}) {
        const double u = SamplingUniform(seed, sample, position);
        EXPECT_GE(u, 0.0);
        EXPECT_LT(u, 1.0);
        distinct.insert(u);
      }
    }
  }
  EXPECT_EQ(distinct.size(), 4u * 3u * 4u);  // every key, sample and position draws apart
}

TEST(PhiloxTest, UniformHasTheRightMean) {
  double sum = 0.0;
  constexpr int kDraws = 100000;
  for (int i = 0; i < kDraws; ++i) sum += SamplingUniform(9, 0, static_cast<uint64_t>(i));
  EXPECT_NEAR(sum / kDraws, 0.5, 0.005);  // standard error 0.0009
}

TEST(PhiloxTest, RequestSeedsDiffer) {
  std::set<uint64_t> seeds;
  for (int i = 0; i < 1000; ++i) seeds.insert(DrawRequestSeed());
  EXPECT_EQ(seeds.size(), 1000u);
}

}  // namespace
}  // namespace ernie

namespace ernie {
namespace {

// vLLM's --seed: after SetRequestSeedBase(s) the seeds drawn for requests
// without one are a fixed sequence of s.
TEST(RequestSeedBaseTest, TheServerSeedFixesTheDrawnSequence) {
  SetRequestSeedBase(42);
  const uint64_t a = DrawRequestSeed(), b = DrawRequestSeed();
  SetRequestSeedBase(42);
  EXPECT_EQ(DrawRequestSeed(), a);
  EXPECT_EQ(DrawRequestSeed(), b);
  EXPECT_NE(a, b);
  SetRequestSeedBase(43);
  EXPECT_NE(DrawRequestSeed(), a);
}

}  // namespace
}  // namespace ernie
