// The AutoAWQ bit layout and the group-wise RTN rounding, on hand-computed cases.
#include "tools/quantize/group_quantizer.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/model/awq_format.h"
#include "engine/util/half.h"
#include "tools/quantize/awq_search.h"

namespace ernie::quantize {
namespace {

TEST(AwqFormatTest, PacksInAutoAwqInterleavedOrder) {
  // Columns 0..7 hold 1..8; nibble n holds column [0,2,4,6,1,3,5,7][n]:
  // nibbles (low to high) 1,3,5,7,2,4,6,8 -> 0x86427531.
  const uint8_t values[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  const int32_t word = AwqPack(values);
  EXPECT_EQ(static_cast<uint32_t>(word), 0x86427531u);
  for (int c = 0; c < 8; ++c) EXPECT_EQ(AwqNibble(word, c), c + 1) << c;
  EXPECT_EQ(AwqNibble(static_cast<int32_t>(0xF0000000u), 7), 15);  // the top nibble is column 7
}

TEST(GroupQuantizerTest, RoundsEachGroupBetweenItsMinAndMax) {
  // out = 8 columns, in = 4 inputs, group 2: column o, group g spans [lo, lo + 1.5].
  const int64_t out = 8, in = 4, group = 2;
  std::vector<float> w(static_cast<size_t>(out * in));
  for (int64_t o = 0; o < out; ++o) {
    w[static_cast<size_t>(o * in + 0)] = -0.5f;       // group 0: [-0.5, 1.0]
    w[static_cast<size_t>(o * in + 1)] = 1.0f;
    w[static_cast<size_t>(o * in + 2)] = 2.0f;        // group 1: [0.5, 2.0], min above zero
    w[static_cast<size_t>(o * in + 3)] = 0.5f;
  }
  const AwqTensors t = QuantizeGroupwise(w.data(), out, in, group);
  ASSERT_EQ(t.qweight.size(), 4u);
  ASSERT_EQ(t.qzeros.size(), 2u);
  ASSERT_EQ(t.scales.size(), 16u);
  // Group 0: s = 1.5 / 15 = 0.1 (as f16), z = round(5) = 5; q(-0.5) = 0, q(1.0) = 15.
  const float s0 = F16ToFloat(FloatToF16(0.1f));
  EXPECT_EQ(F16ToFloat(t.scales[0]), s0);
  EXPECT_EQ(AwqNibble(t.qzeros[0], 3), 5);
  EXPECT_EQ(AwqNibble(t.qweight[0], 0), 0);
  EXPECT_EQ(AwqNibble(t.qweight[1], 6), 15);
  // Group 1: min 0.5 > 0 clamps the zero point at 0 (AutoAWQ's rule), so
  // 2.0 / 0.1 = 20 clamps to 15 and 0.5 -> 5.
  EXPECT_EQ(AwqNibble(t.qzeros[1], 0), 0);
  EXPECT_EQ(AwqNibble(t.qweight[2], 2), 15);
  EXPECT_EQ(AwqNibble(t.qweight[3], 7), 5);

  std::vector<float> back(w.size());
  DequantizeToOutIn(t, back.data());
  EXPECT_EQ(back[0], (0 - 5) * s0);
  EXPECT_EQ(back[1], (15 - 5) * s0);
  EXPECT_EQ(back[2], 15 * s0);  // 2.0 saturates at 1.5
  EXPECT_EQ(back[3], 5 * s0);
}

TEST(GroupQuantizerTest, QuantizeDequantizeRowsIsThePackedRoundTripBitForBit) {
  // Rows of mixed ranges: a constant group (the 1e-5 floor), huge values (the
  // f16 clamp of the scale), a group all negative, a group all positive.
  const int64_t out = 24, in = 128, group = 32;
  std::vector<float> w(static_cast<size_t>(out * in));
  for (int64_t k = 0; k < out * in; ++k) {
    const int64_t o = k / in, g = (k % in) / group;
    float v = static_cast<float>((k * 2654435761LL) % 2001 - 1000) / 997.0f;
    if (o == 3 && g == 1) v = 0.25f;
    if (o == 5) v *= 2.0e6f;
    if (g == 2) v = -std::abs(v) - 0.5f;
    if (g == 3) v = std::abs(v) + 0.5f;
    if (o == 7 && k % 3 == 0) v = (k % 2) ? -0.0f : 0.0f;  // signed zeros, and weights that round to the zero point
    w[static_cast<size_t>(k)] = v;
  }
  std::vector<float> packed(w.size()), direct(w.size());
  DequantizeToOutIn(QuantizeGroupwise(w.data(), out, in, group), packed.data());
  QuantizeDequantizeRows(w.data(), out, in, group, direct.data());
  for (size_t k = 0; k < w.size(); ++k)
    ASSERT_EQ(std::bit_cast<uint32_t>(direct[k]), std::bit_cast<uint32_t>(packed[k])) << "weight " << k;
  // In place, as the search calls it.
  std::vector<float> in_place = w;
  QuantizeDequantizeRows(in_place.data(), out, in, group, in_place.data());
  for (size_t k = 0; k < w.size(); ++k)
    ASSERT_EQ(std::bit_cast<uint32_t>(in_place[k]), std::bit_cast<uint32_t>(packed[k])) << "weight " << k;
}

TEST(AwqSearchTest, ChosenLossNeverAboveRoundToNearest) {
  // 9 calibration rows of 64 inputs with a few loud channels: AWQ's case.
  const int64_t rows = 9, in = 64, out = 16;
  std::vector<float> x(static_cast<size_t>(rows * in)), w(static_cast<size_t>(out * in)), mean_abs(in, 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < in; ++i)
      x[static_cast<size_t>(r * in + i)] = static_cast<float>(((r * 31 + i * 17) % 13) - 6) * (i % 11 == 0 ? 20.0f : 1.0f);
  for (int64_t k = 0; k < out * in; ++k) w[static_cast<size_t>(k)] = static_cast<float>((k * 7919) % 101 - 50) / 100.0f;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < in; ++i) mean_abs[static_cast<size_t>(i)] += std::abs(x[static_cast<size_t>(r * in + i)]) / rows;
  ThreadPool pool(1);
  const SearchInput input{x.data(), rows, {{w.data(), out}}};
  const ScaleSearchResult r = SearchScales({&input, 1}, in, mean_abs, 32, 20, pool);
  EXPECT_LE(r.loss, r.rtn_loss);
  EXPECT_GT(r.alpha, 0.0) << "loud channels should pull alpha above 0";
  EXPECT_LT(r.loss, r.rtn_loss);
  const std::vector<float> ones(in, 1.0f);
  EXPECT_DOUBLE_EQ(QuantizationLoss({&input, 1}, in, ones, 32, pool), r.rtn_loss);
  EXPECT_DOUBLE_EQ(QuantizationLoss({&input, 1}, in, r.scales, 32, pool), r.loss);
}

TEST(AwqSearchTest, InputsOfTheirOwnRowsWeighByRowsAndOutputs) {
  // A MoE block's case: two linears scaled together read different rows
  // (an expert its routed tokens); one more reads none.
  const int64_t in = 64;
  std::vector<float> x(static_cast<size_t>(7 * in)), w1(static_cast<size_t>(16 * in)), w2(static_cast<size_t>(8 * in));
  for (size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>((k * 37) % 23) - 11.0f + (k % 64 == 5 ? 30.0f : 0.0f);
  for (size_t k = 0; k < w1.size(); ++k) w1[k] = static_cast<float>((k * 7919) % 101 - 50) / 100.0f;
  for (size_t k = 0; k < w2.size(); ++k) w2[k] = static_cast<float>((k * 613) % 89 - 44) / 90.0f;
  std::vector<float> s(in);
  for (int64_t i = 0; i < in; ++i) s[static_cast<size_t>(i)] = 0.5f + static_cast<float>(i % 5) * 0.25f;
  ThreadPool pool(2);
  const SearchInput first{x.data(), 7, {{w1.data(), 16}}};
  const SearchInput second{x.data() + 2 * in, 3, {{w2.data(), 8}}};
  const SearchInput unread{x.data(), 0, {{w2.data(), 8}}};
  const double a = QuantizationLoss({&first, 1}, in, s, 32, pool);
  const double b = QuantizationLoss({&second, 1}, in, s, 32, pool);
  const SearchInput all[] = {first, second, unread};
  EXPECT_NEAR(QuantizationLoss(all, in, s, 32, pool), (a * 7 * 16 + b * 3 * 8) / (7 * 16 + 3 * 8), 1e-12 * a);
  EXPECT_EQ(QuantizationLoss({&unread, 1}, in, s, 32, pool), 0.0);
  std::vector<float> mean_abs(in, 0.0f);
  for (int64_t r = 0; r < 7; ++r)
    for (int64_t i = 0; i < in; ++i) mean_abs[static_cast<size_t>(i)] += std::abs(x[static_cast<size_t>(r * in + i)]) / 7;
  const ScaleSearchResult r = SearchScales(all, in, mean_abs, 32, 10, pool);
  EXPECT_LE(r.loss, r.rtn_loss);
  EXPECT_DOUBLE_EQ(QuantizationLoss(all, in, r.scales, 32, pool), r.loss);
  const ScaleSearchResult none = RoundToNearestScales(in);
  EXPECT_EQ(none.alpha, 0.0);
  EXPECT_EQ(none.scales, std::vector<float>(in, 1.0f));
}

}  // namespace
}  // namespace ernie::quantize
