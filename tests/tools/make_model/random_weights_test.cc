#include "tools/make_model/random_weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "engine/util/half.h"

namespace ernie::make_model {
namespace {

TensorEntry Projection(const std::string& name, int64_t rows, int64_t cols) {
  return {.name = name, .shape = {rows, cols}, .kind = WeightKind::kProjection, .fan_in = cols};
}

TEST(RandomWeightsTest, StandardNormalHasUnitSpreadAndZeroMean) {
  double sum = 0, sum_sq = 0;
  constexpr int kCount = 200000;
  for (int i = 0; i < kCount; ++i) {
    const double z = StandardNormalAt(12345, i);
    sum += z;
    sum_sq += z * z;
  }
  const double mean = sum / kCount;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(sum_sq / kCount - mean * mean), 1.0, 0.01);
}

TEST(RandomWeightsTest, SpreadsFollowTheTensorKind) {
  const TensorEntry proj = Projection("p", 64, 400);
  const TensorEntry norm{.name = "n", .shape = {400}, .kind = WeightKind::kNorm, .fan_in = 400};
  const TensorEntry embed{.name = "e", .shape = {100, 400}, .kind = WeightKind::kEmbedding, .fan_in = 400};
  auto stats = [](const TensorEntry& t) {
    double sum = 0, sum_sq = 0;
    const uint64_t key = TensorStreamKey(3, t);
    for (int i = 0; i < 40000; ++i) {
      const double v = WeightValueAt(key, t, i);
      sum += v;
      sum_sq += v * v;
    }
    const double mean = sum / 40000;
    return std::pair{mean, std::sqrt(sum_sq / 40000 - mean * mean)};
  };
  EXPECT_NEAR(stats(proj).second, 1.0 / 20.0, 0.002);  // 1/sqrt(400)
  EXPECT_NEAR(stats(norm).first, 1.0, 0.005);
  EXPECT_NEAR(stats(norm).second, 0.1, 0.005);
  EXPECT_NEAR(stats(embed).second, 0.25, 0.01);
}

TEST(RandomWeightsTest, ChunkingDoesNotChangeTheBytes) {
  const TensorEntry t = Projection("model.layers.0.mlp.up_proj.weight", 7, 333);
  std::vector<uint8_t> whole(7 * 333 * 2), pieces(whole.size());
  ASSERT_TRUE(FillWeightBytes(9, t, WeightDtype::kBFloat16, 0, whole).ok());
  const size_t split = 1000;  // an even byte offset in the middle
  ASSERT_TRUE(FillWeightBytes(9, t, WeightDtype::kBFloat16, 0, std::span(pieces).first(split)).ok());
  ASSERT_TRUE(FillWeightBytes(9, t, WeightDtype::kBFloat16, split, std::span(pieces).subspan(split)).ok());
  EXPECT_EQ(whole, pieces);
}

TEST(RandomWeightsTest, SeedAndNameSelectTheStream) {
  const TensorEntry a = Projection("a", 4, 16), b = Projection("b", 4, 16);
  std::vector<uint8_t> a1(128), a1_again(128), a2(128), b1(128);
  ASSERT_TRUE(FillWeightBytes(1, a, WeightDtype::kBFloat16, 0, a1).ok());
  ASSERT_TRUE(FillWeightBytes(1, a, WeightDtype::kBFloat16, 0, a1_again).ok());
  ASSERT_TRUE(FillWeightBytes(2, a, WeightDtype::kBFloat16, 0, a2).ok());
  ASSERT_TRUE(FillWeightBytes(1, b, WeightDtype::kBFloat16, 0, b1).ok());
  EXPECT_EQ(a1, a1_again);
  EXPECT_NE(a1, a2);
  EXPECT_NE(a1, b1);
}

TEST(RandomWeightsTest, StoresEachDtypeLittleEndianRoundedFromFloat32) {
  const TensorEntry t = Projection("w", 1, 5);
  const uint64_t key = TensorStreamKey(4, t);
  std::vector<uint8_t> bf16(10), f16(10), f32(20);
  ASSERT_TRUE(FillWeightBytes(4, t, WeightDtype::kBFloat16, 0, bf16).ok());
  ASSERT_TRUE(FillWeightBytes(4, t, WeightDtype::kFloat16, 0, f16).ok());
  ASSERT_TRUE(FillWeightBytes(4, t, WeightDtype::kFloat32, 0, f32).ok());
  for (int i = 0; i < 5; ++i) {
    const float v = WeightValueAt(key, t, i);
    EXPECT_EQ(bf16[2 * i] | (bf16[2 * i + 1] << 8), FloatToBf16(v));
    EXPECT_EQ(f16[2 * i] | (f16[2 * i + 1] << 8), FloatToF16(v));
    uint32_t bits = 0;
    for (int k = 0; k < 4; ++k) bits |= static_cast<uint32_t>(f32[4 * i + k]) << (8 * k);
    EXPECT_EQ(std::bit_cast<float>(bits), v);
  }
}

TEST(RandomWeightsTest, RejectsMisalignedChunks) {
  const TensorEntry t = Projection("w", 2, 2);
  std::vector<uint8_t> out(3);
  EXPECT_EQ(FillWeightBytes(0, t, WeightDtype::kBFloat16, 0, out).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ernie::make_model
