// The row-wise kernels of the unfused forward pass (kernels/elementwise.cu:
// residual add + RMSNorm, SiLU-and-mul; kernels/rotary_kv_write.cu: rotary
// embedding + K/V cache write) against float32 references written here, on
// widths that take each kernel's vector path (multiples of 4, one to eight
// float4s a thread) and its plain loop (other widths, rows too wide to hold).
//
// Tolerances: the residual add is the same float32 expression on both
// sides (x + (delta + bias)), so it must match bit for bit; the norm's sum of
// squares is added in another order (float32, relative error ~1e-6), and the
// output is bf16 (2^-8 relative); SiLU uses expf on both sides (a few float32
// ulps apart) before the same bf16 rounding, on float32 or bf16 gate|up
// rows; the rotation uses the device's sincosf against the host's double
// sin/cos of the same float32 angle.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "engine/backend/cuda/kernels/elementwise.h"
#include "engine/backend/cuda/kernels/rotary_kv_write.h"
#include "engine/util/half.h"
#include "tests/engine/cuda/backend_runner.h"
#include "tests/engine/cuda/device_copies.h"
#include "tests/engine/cuda/random_inputs.h"

namespace ernie::testing {
namespace {

std::vector<float> Bf16Values(const std::vector<uint16_t>& raw) {
  std::vector<float> out(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) out[i] = Bf16ToFloat(raw[i]);
  return out;
}

// |got - want| within one bf16 rounding of want (plus the float32 noise before it).
void ExpectBf16Near(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    const float bound = std::ldexp(std::fabs(want[i]), -7) + 1e-6f;
    if (std::fabs(got[i] - want[i]) > bound) {
      ADD_FAILURE() << what << "[" << i << "]: " << got[i] << " vs " << want[i];
      ++bad;
    }
  }
}

struct NormCase {
  int hidden;
  bool delta, bias, gather;
};

TEST(AddRmsNormKernelTest, MatchesTheReferenceOnEveryPath) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  std::mt19937 gen(7);
  constexpr int kRows = 5;
  // 1,024 / 2,048 / 2,560 / 8,192: one, two, three (in four) and eight float4s
  // a thread; 1,026 and 8,196: the plain loop.
  for (const NormCase c :
       {NormCase{1024, true, true, false}, NormCase{1024, false, false, false}, NormCase{2048, true, false, false},
        NormCase{2560, true, true, false}, NormCase{8192, true, true, false}, NormCase{1024, true, true, true},
        NormCase{1026, true, true, false}, NormCase{1026, true, false, true}, NormCase{8196, true, false, false}}) {
    SCOPED_TRACE(::testing::Message() << "hidden=" << c.hidden << " delta=" << c.delta << " bias=" << c.bias
                                      << " gather=" << c.gather);
    const size_t size = static_cast<size_t>(kRows) * c.hidden;
    const auto x0 = RandomFloats(size, gen, 3.0f), delta = RandomFloats(size, gen);
    const auto bias = RandomFloats(c.hidden, gen, 0.5f), weight = RandomFloats(c.hidden, gen, 2.0f);
    // Gathered rows (the logit pass): rows 4, 0, 2 of x, x left as it is.
    const std::vector<int32_t> rows = c.gather ? std::vector<int32_t>{4, 0, 2} : std::vector<int32_t>{0, 1, 2, 3, 4};
    auto x = Upload(x0);
    const auto d_delta = Upload(delta), d_bias = Upload(bias), d_weight = Upload(weight);
    const auto d_rows = Upload(rows);
    auto out = Zeros<uint16_t>(rows.size() * c.hidden);
    const cuda::AddRmsNormParams p{.x = x.data(),
                                   .delta = c.delta ? d_delta.data() : nullptr,
                                   .delta_bias = c.bias ? d_bias.data() : nullptr,
                                   .weight = d_weight.data(),
                                   .row_index = c.gather ? d_rows.data() : nullptr,
                                   .out = reinterpret_cast<__nv_bfloat16*>(out.data()),
                                   .rows = static_cast<int32_t>(rows.size()),
                                   .hidden = c.hidden,
                                   .eps = 1e-5f,
                                   .write_residual = !c.gather};
    ASSERT_EQ(cuda::LaunchAddRmsNorm(p, nullptr), cudaSuccess);
    std::vector<float> want_x = x0, want_out(rows.size() * c.hidden);
    for (size_t r = 0; r < rows.size(); ++r) {
      const size_t row = static_cast<size_t>(rows[r]) * c.hidden;
      std::vector<float> v(c.hidden);
      double sum = 0.0;
      for (int i = 0; i < c.hidden; ++i) {
        v[i] = x0[row + i];
        if (c.delta) v[i] = v[i] + (delta[row + i] + (c.bias ? bias[i] : 0.0f));
        sum += static_cast<double>(v[i]) * v[i];
      }
      if (!c.gather) std::copy(v.begin(), v.end(), want_x.begin() + static_cast<ptrdiff_t>(row));
      const auto scale = static_cast<float>(1.0 / std::sqrt(sum / c.hidden + 1e-5));
      for (int i = 0; i < c.hidden; ++i) want_out[r * c.hidden + i] = weight[i] * (v[i] * scale);
    }
    EXPECT_EQ(Download(x), want_x) << "the residual stream after the add";
    ExpectBf16Near(Bf16Values(Download(out)), want_out, "normalised row");
  }
}

TEST(SiluAndMulKernelTest, MatchesTheReferenceOnEveryPath) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  std::mt19937 gen(8);
  constexpr int kTokens = 3;
  for (int intermediate : {3072, 1536, 12, 1030})  // 1,030: the plain loop
    for (bool with_bias : {false, true})
      for (bool bf16_input : {false, true}) {  // the cuBLAS path's gate|up is bf16
        SCOPED_TRACE(::testing::Message()
                     << "intermediate=" << intermediate << " bias=" << with_bias << " bf16 input=" << bf16_input);
        auto gate_up = RandomFloats(static_cast<size_t>(kTokens) * 2 * intermediate, gen, 6.0f);
        std::vector<uint16_t> gate_up_bf16(gate_up.size());
        for (size_t i = 0; i < gate_up.size(); ++i) {
          gate_up_bf16[i] = FloatToBf16(gate_up[i]);
          if (bf16_input) gate_up[i] = Bf16ToFloat(gate_up_bf16[i]);  // what the kernel reads
        }
        const auto bias = RandomFloats(2 * static_cast<size_t>(intermediate), gen);
        const auto d_gate_up = Upload(gate_up), d_bias = Upload(bias);
        const auto d_gate_up_bf16 = Upload(gate_up_bf16);
        auto out = Zeros<uint16_t>(static_cast<size_t>(kTokens) * intermediate);
        auto* out_bf16 = reinterpret_cast<__nv_bfloat16*>(out.data());
        const float* d_bias_or_null = with_bias ? d_bias.data() : nullptr;
        ASSERT_EQ(bf16_input ? cuda::LaunchSiluAndMul(reinterpret_cast<const __nv_bfloat16*>(d_gate_up_bf16.data()),
                                                      d_bias_or_null, kTokens, intermediate, out_bf16, nullptr)
                             : cuda::LaunchSiluAndMul(d_gate_up.data(), d_bias_or_null, kTokens, intermediate, out_bf16,
                                                      nullptr),
                  cudaSuccess);
        std::vector<float> want(static_cast<size_t>(kTokens) * intermediate);
        for (int t = 0; t < kTokens; ++t)
          for (int i = 0; i < intermediate; ++i) {
            const size_t row = static_cast<size_t>(t) * 2 * intermediate;
            const float g = gate_up[row + i] + (with_bias ? bias[i] : 0.0f);
            const float u = gate_up[row + intermediate + i] + (with_bias ? bias[intermediate + i] : 0.0f);
            want[static_cast<size_t>(t) * intermediate + i] = g / (1.0f + std::exp(-g)) * u;
          }
        ExpectBf16Near(Bf16Values(Download(out)), want, "silu(g) * u");
      }
}

TEST(RotaryKvWriteKernelTest, MatchesTheReferenceOnEveryPath) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  std::mt19937 gen(9);
  constexpr int kTokens = 3, kHeads = 4, kKvHeads = 2, kBlockSize = 16, kBlocks = 4;
  const std::vector<int32_t> positions = {0, 17, 300}, slots = {5, 16 + 3, 3 * 16 + 15};
  for (int head_dim : {128, 64, 6})  // 6: the plain loop (not a multiple of 4)
    for (bool with_bias : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "head_dim=" << head_dim << " bias=" << with_bias);
      const int width = (kHeads + 2 * kKvHeads) * head_dim;
      const auto qkv0 = RandomFloats(static_cast<size_t>(kTokens) * width, gen, 2.0f);
      const auto bias = RandomFloats(width, gen, 0.5f);
      std::vector<float> inv_freq(head_dim / 2);
      for (int i = 0; i < head_dim / 2; ++i) inv_freq[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / head_dim));
      auto qkv = Upload(qkv0);
      const auto d_bias = Upload(bias), d_freq = Upload(inv_freq);
      const auto d_positions = Upload(positions), d_slots = Upload(slots);
      const size_t cache_size = static_cast<size_t>(kBlocks) * kKvHeads * kBlockSize * head_dim;
      auto k = Zeros<uint16_t>(cache_size), v = Zeros<uint16_t>(cache_size);
      const cuda::PagedKvView cache{.k = reinterpret_cast<__nv_bfloat16*>(k.data()),
                                    .v = reinterpret_cast<__nv_bfloat16*>(v.data()),
                                    .num_blocks = kBlocks,
                                    .num_kv_heads = kKvHeads,
                                    .block_size = kBlockSize,
                                    .head_dim = head_dim};
      ASSERT_EQ(cuda::LaunchRotaryKvWrite({.qkv = qkv.data(),
                                           .bias = with_bias ? d_bias.data() : nullptr,
                                           .positions = d_positions.data(),
                                           .slots = d_slots.data(),
                                           .inv_freq = d_freq.data(),
                                           .cache = cache,
                                           .tokens = kTokens,
                                           .num_heads = kHeads,
                                           .num_kv_heads = kKvHeads,
                                           .head_dim = head_dim},
                                          nullptr),
                cudaSuccess);
      std::vector<float> want_q(qkv0), want_k(cache_size, 0.0f), want_v(cache_size, 0.0f);
      std::vector<float> tolerance(qkv0.size(), 0.0f);
      for (int t = 0; t < kTokens; ++t) {
        const size_t row = static_cast<size_t>(t) * width;
        auto col = [&](int c) { return qkv0[row + c] + (with_bias ? bias[c] : 0.0f); };
        const int block = slots[t] / kBlockSize, block_row = slots[t] % kBlockSize;
        for (int head = 0; head < kHeads + kKvHeads; ++head)
          for (int i = 0; i < head_dim / 2; ++i) {
            const int c = head * head_dim + 2 * i;
            const float a = col(c), b = col(c + 1);
            const double angle = static_cast<float>(positions[t]) * inv_freq[i];  // the float32 angle
            const auto ra = static_cast<float>(a * std::cos(angle) - b * std::sin(angle));
            const auto rb = static_cast<float>(b * std::cos(angle) + a * std::sin(angle));
            if (head < kHeads) {
              want_q[row + c] = ra;
              want_q[row + c + 1] = rb;
              tolerance[row + c] = tolerance[row + c + 1] = 1e-5f * (std::fabs(a) + std::fabs(b)) + 1e-6f;
            } else {
              const size_t at = static_cast<size_t>(cuda::KvOffset(cache, block, head - kHeads, block_row)) + 2 * i;
              want_k[at] = ra;
              want_k[at + 1] = rb;
            }
          }
        for (int head = 0; head < kKvHeads; ++head)
          for (int j = 0; j < head_dim; ++j)
            want_v[static_cast<size_t>(cuda::KvOffset(cache, block, head, block_row)) + j] =
                col((kHeads + kKvHeads + head) * head_dim + j);
      }
      const auto got_q = Download(qkv);
      for (size_t i = 0; i < got_q.size(); ++i) {
        // k and v columns of qkv are read only: they must be untouched.
        ASSERT_LE(std::fabs(got_q[i] - want_q[i]), tolerance[i]) << "qkv[" << i << "]";
      }
      ExpectBf16Near(Bf16Values(Download(k)), want_k, "key cache");
      EXPECT_EQ(Bf16Values(Download(v)), [&] {  // v: bias added in float32, one bf16 rounding, exact
        std::vector<float> rounded(want_v.size());
        for (size_t i = 0; i < want_v.size(); ++i) rounded[i] = Bf16ToFloat(FloatToBf16(want_v[i]));
        return rounded;
      }());
    }
}

TEST(RowwiseKernelsTest, RejectBadParameters) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  EXPECT_EQ(cuda::LaunchAddRmsNorm({}, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cuda::LaunchSiluAndMul(static_cast<const float*>(nullptr), nullptr, 1, 8, nullptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cuda::LaunchSiluAndMul(static_cast<const __nv_bfloat16*>(nullptr), nullptr, 1, 8, nullptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(cuda::LaunchRotaryKvWrite({}, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace ernie::testing
