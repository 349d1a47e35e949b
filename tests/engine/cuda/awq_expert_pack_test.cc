// Host-side preparation of AWQ MoE experts (engine/backend/cuda/awq_expert_pack.h),
// checked on the weights the AutoAWQ tensors mean (dequantised here from
// the documented nibble order, awq_test_case.h), so no GPU is needed:
// - gate|up interleaved by 8 outputs: row 16i + j is gate row 8i + j, row
//   16i + 8 + j up row 8i + j, bit for bit;
// - output and input slices are the sub-matrices, and an input slice that
//   cuts a group is an InvalidArgument naming the tensor and the sizes;
// - the stacks hold each expert's repacked linears at e x one expert's
//   words, routed experts first, then the shared experts' S pseudo-experts.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/backend/cuda/awq_expert_pack.h"
#include "engine/backend/cuda/kernels/awq_gemm.h"
#include "engine/util/half.h"
#include "tests/engine/cuda/awq_test_case.h"

namespace ernie::testing {
namespace {

// Rows [row0, row0 + rows) x columns [col0, col0 + cols) of w [*, width].
std::vector<float> Block(const std::vector<float>& w, int width, int row0, int rows, int col0, int cols) {
  std::vector<float> out;
  for (int r = row0; r < row0 + rows; ++r)
    out.insert(out.end(), w.begin() + r * width + col0, w.begin() + r * width + col0 + cols);
  return out;
}

TEST(AwqExpertPackTest, GateAndUpInterleaveByEightOutputs) {
  std::mt19937 gen(21);
  const int n = 40, k = 128;  // 5 groups of 8 features
  for (int group : {32, 64, 128}) {
    const AwqCase gate = MakeAwqCase(n, k, group, gen), up = MakeAwqCase(n, k, group, gen);
    auto both = cuda::InterleaveAwqGateUp(gate.Raw(), up.Raw(), "experts.0");
    ASSERT_TRUE(both.ok()) << both.status();
    ASSERT_EQ(both->n, 2 * n);
    ASSERT_EQ(both->k, k);
    const std::vector<float> w = DequantizeAwq(both->raw());
    for (int row = 0; row < 2 * n; ++row) {
      const int feature = row / 16 * 8 + row % 8;
      const AwqCase& from = row % 16 < 8 ? gate : up;
      ASSERT_EQ(Block(w, k, row, 1, 0, k), Block(from.w, k, feature, 1, 0, k)) << "row " << row << " group " << group;
    }
  }
}

TEST(AwqExpertPackTest, InterleaveRefusesLinearsOfDifferentShapes) {
  std::mt19937 gen(22);
  const AwqCase gate = MakeAwqCase(16, 128, 64, gen), up = MakeAwqCase(24, 128, 64, gen);
  auto both = cuda::InterleaveAwqGateUp(gate.Raw(), up.Raw(), "model.layers.1.mlp.experts.3");
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(both.status().message().find("model.layers.1.mlp.experts.3: gate_proj [k=128, n=16"), std::string::npos)
      << both.status();
}

TEST(AwqExpertPackTest, SlicesAreTheSubMatrices) {
  std::mt19937 gen(23);
  const AwqCase c = MakeAwqCase(48, 256, 64, gen);  // [48 out, 256 in]
  auto outputs = cuda::AwqOutputSlice(c.Raw(), 16, 24, "shared.gate_proj");
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_EQ(DequantizeAwq(outputs->raw()), Block(c.w, 256, 16, 24, 0, 256));
  auto inputs = cuda::AwqInputSlice(c.Raw(), 128, 128, "shared.down_proj");
  ASSERT_TRUE(inputs.ok()) << inputs.status();
  EXPECT_EQ(DequantizeAwq(inputs->raw()), Block(c.w, 256, 0, 48, 128, 128));
  // Not whole packed words along the outputs.
  EXPECT_FALSE(cuda::AwqOutputSlice(c.Raw(), 4, 8, "x").ok());
  EXPECT_FALSE(cuda::AwqOutputSlice(c.Raw(), 40, 16, "x").ok());  // past n
}

TEST(AwqExpertPackTest, AnInputSliceThatCutsAGroupNamesTheTensorAndSizes) {
  std::mt19937 gen(24);
  const AwqCase c = MakeAwqCase(64, 192, 64, gen);
  auto cut = cuda::AwqInputSlice(c.Raw(), 96, 96, "model.layers.1.mlp.shared_experts.down_proj");
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cut.status().message(),
            "model.layers.1.mlp.shared_experts.down_proj: cannot split its 192 inputs into pieces of 96 at 96: the "
            "pieces must be whole groups of group_size 64 (96 % 64 = 32)");
}

// Experts of width I = 64 over H = 128 (2 routed, one shared MLP of 2 x 64).
struct Mlp {
  AwqCase gate, up, down;
  cuda::AwqMlpRaw Raw(const std::string& name) const { return {gate.Raw(), up.Raw(), down.Raw(), name}; }
};
Mlp MakeMlp(int width, int hidden, int group, std::mt19937& gen) {
  return {MakeAwqCase(width, hidden, group, gen), MakeAwqCase(width, hidden, group, gen),
          MakeAwqCase(hidden, width, group, gen)};
}

TEST(AwqExpertPackTest, StacksRoutedExpertsThenSharedPseudoExperts) {
  std::mt19937 gen(25);
  const int hidden = 128, width = 64, group = 32;
  const std::vector<Mlp> routed = {MakeMlp(width, hidden, group, gen), MakeMlp(width, hidden, group, gen)};
  const Mlp shared = MakeMlp(2 * width, hidden, group, gen);
  const std::vector<cuda::AwqMlpRaw> raws = {routed[0].Raw("experts.0"), routed[1].Raw("experts.1")};
  const cuda::AwqMlpRaw shared_raw = shared.Raw("shared_experts");
  auto stacks = cuda::StackAwqExperts(raws, &shared_raw, width);
  ASSERT_TRUE(stacks.ok()) << stacks.status();
  EXPECT_EQ(stacks->experts, 4);
  EXPECT_EQ(stacks->hidden, hidden);
  EXPECT_EQ(stacks->width, width);
  EXPECT_EQ(stacks->group_size, group);
  const int64_t gu_words = cuda::AwqPackedWords(2 * width, hidden), gu_records = cuda::AwqRecordWords(2 * width, hidden, group);
  const int64_t d_words = cuda::AwqPackedWords(hidden, width), d_records = cuda::AwqRecordWords(hidden, width, group);
  ASSERT_EQ(static_cast<int64_t>(stacks->gate_up_packed.size()), 4 * gu_words);
  ASSERT_EQ(static_cast<int64_t>(stacks->gate_up_records.size()), 4 * gu_records);
  ASSERT_EQ(static_cast<int64_t>(stacks->down_packed.size()), 4 * d_words);
  ASSERT_EQ(static_cast<int64_t>(stacks->down_records.size()), 4 * d_records);
  // Expert e's pieces, repacked on their own, from the float32 weights they must mean.
  for (int e = 0; e < 4; ++e) {
    SCOPED_TRACE(::testing::Message() << "expert " << e);
    std::vector<float> gate, up, down;
    if (e < 2) {
      gate = routed[e].gate.w, up = routed[e].up.w, down = routed[e].down.w;
    } else {
      const int first = (e - 2) * width;
      gate = Block(shared.gate.w, hidden, first, width, 0, hidden);
      up = Block(shared.up.w, hidden, first, width, 0, hidden);
      down = Block(shared.down.w, 2 * width, 0, hidden, first, width);
    }
    // Unpack the stacked repacked words through the header's layout (awq_gemm.h).
    auto unpack = [&](const std::vector<uint32_t>& packed, const std::vector<uint32_t>& records, int64_t word0,
                      int64_t record0, int n, int k) {
      std::vector<float> w(static_cast<size_t>(n) * k);
      const int blocks = k / 64, groups2 = (k / group + 1) / 2 * 2;
      for (int row = 0; row < n; ++row)
        for (int kk = 0; kk < k; ++kk) {
          const int tile = row / 16, g = row % 8, half = kk % 64 / 32, c4 = kk % 32 / 8, p = kk % 8 / 2, i = kk % 2;
          const uint32_t word = packed[static_cast<size_t>(
              word0 + ((static_cast<int64_t>(tile) * blocks + kk / 64) * 32 + 4 * g + c4) * 4 + 2 * half + row % 16 / 8)];
          const uint32_t rec = records[static_cast<size_t>(
              record0 + ((static_cast<int64_t>(tile) * 8 + g) * groups2 + kk / group) * 2 + row % 16 / 8)];
          const int q = static_cast<int>((word >> (4 * p + 16 * i)) & 0xF), z = static_cast<int>(rec >> 16) - 0x4300;
          w[static_cast<size_t>(row) * k + kk] = static_cast<float>(q - z) * F16ToFloat(static_cast<uint16_t>(rec & 0xffff));
        }
      return w;
    };
    const auto got_gate_up =
        unpack(stacks->gate_up_packed, stacks->gate_up_records, e * gu_words, e * gu_records, 2 * width, hidden);
    for (int row = 0; row < 2 * width; ++row) {
      const int feature = row / 16 * 8 + row % 8;
      const std::vector<float>& from = row % 16 < 8 ? gate : up;
      ASSERT_EQ(Block(got_gate_up, hidden, row, 1, 0, hidden), Block(from, hidden, feature, 1, 0, hidden))
          << "gate|up row " << row;
    }
    EXPECT_EQ(unpack(stacks->down_packed, stacks->down_records, e * d_words, e * d_records, hidden, width), down);
  }
}

TEST(AwqExpertPackTest, RefusesExpertsTheKernelsCannotTake) {
  std::mt19937 gen(26);
  // Shared experts of width 2 x 48 in groups of 32: down_proj's inputs split at 48, inside a group.
  const Mlp routed = MakeMlp(48, 128, 32, gen), shared = MakeMlp(96, 128, 32, gen);
  const std::vector<cuda::AwqMlpRaw> raws = {routed.Raw("model.layers.1.mlp.experts.0")};
  const cuda::AwqMlpRaw shared_raw = shared.Raw("model.layers.1.mlp.shared_experts");
  auto split = cuda::StackAwqExperts(raws, &shared_raw, 48);
  ASSERT_FALSE(split.ok());
  EXPECT_EQ(split.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(split.status().message().find("model.layers.1.mlp.shared_experts.down_proj: cannot split its 96 inputs "
                                          "into pieces of 48 at 0"),
            std::string::npos)
      << split.status();
  // Width 48 without shared experts: down_proj's 48 inputs are not a multiple of 64.
  auto narrow = cuda::StackAwqExperts(raws, nullptr, 48);
  ASSERT_FALSE(narrow.ok());
  EXPECT_NE(narrow.status().message().find("model.layers.1.mlp.experts.0.down_proj: the CUDA int4 expert kernels "
                                           "cannot take this linear: AWQ k=48"),
            std::string::npos)
      << narrow.status();
  // An expert of another width than the rest.
  const Mlp other = MakeMlp(64, 128, 32, gen), wide = MakeMlp(128, 128, 32, gen);
  const std::vector<cuda::AwqMlpRaw> mixed = {other.Raw("experts.0"), wide.Raw("experts.1")};
  auto mismatch = cuda::StackAwqExperts(mixed, nullptr, 64);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("experts.1.gate_proj: AWQ linear of 128 outputs"), std::string::npos)
      << mismatch.status();
}

}  // namespace
}  // namespace ernie::testing
