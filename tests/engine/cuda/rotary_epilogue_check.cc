#include "tests/engine/cuda/rotary_epilogue_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/kernels/rotary_kv_write.h"
#include "engine/util/half.h"
#include "tests/engine/cuda/device_copies.h"

namespace ernie::testing {

void ExpectRotaryKvEpilogueEqualsTheRotaryKernel(
    const std::function<cudaError_t(const cuda::DecodeLinearParams&)>& launch,
    const std::vector<int32_t>& row_counts) {
  constexpr int32_t kHeads = kRotaryCheckHeads, kKvHeads = kRotaryCheckKvHeads, kDim = kRotaryCheckHeadDim;
  constexpr int32_t kK = kRotaryCheckK, kN = kRotaryCheckN, kBlocks = 24;
  std::mt19937 rng(99);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> inv_freq(kDim / 2);
  for (int i = 0; i < kDim / 2; ++i) inv_freq[static_cast<size_t>(i)] = std::pow(10000.0f, -2.0f * i / kDim);
  // Blocks of 4 slots, and of 3: block_size need not be a power of two, and
  // the epilogues' slot -> (block, row) must not assume one.
  for (const int32_t block_size : {4, 3})
  for (const int32_t m : row_counts) {
    const size_t plane = size_t{kBlocks} * kKvHeads * block_size * kDim;
    ASSERT_LE(m, kBlocks * block_size) << "every row needs a slot of its own";
    SCOPED_TRACE(absl::StrCat("m=", m, ", block size ", block_size));
    std::vector<float> x(static_cast<size_t>(m) * kK), bias(kN);
    std::vector<uint16_t> cache0(plane);
    for (auto& v : x) v = uni(rng) * 3.0f;
    for (auto& v : bias) v = uni(rng);
    for (auto& v : cache0) v = FloatToBf16(uni(rng));
    std::vector<int32_t> positions(static_cast<size_t>(m)), slots(static_cast<size_t>(m));
    for (int32_t r = 0; r < m; ++r) {
      positions[static_cast<size_t>(r)] = 3 + 997 * r;
      slots[static_cast<size_t>(r)] = (r * 11 + 5) % (kBlocks * block_size);  // distinct: 11 is prime to 72 and 96
    }
    const auto d_x = Upload(x), d_bias = Upload(bias), d_freq = Upload(inv_freq);
    const auto d_pos = Upload(positions), d_slots = Upload(slots);
    std::vector<float> y0(static_cast<size_t>(m) * kN, 0.0f);
    auto y_ref = Upload(y0), y_fused = Upload(y0);
    auto k_ref = Upload(cache0), v_ref = Upload(cache0), k_fused = Upload(cache0), v_fused = Upload(cache0);
    auto view = [&](cuda::DeviceBuffer<uint16_t>& k, cuda::DeviceBuffer<uint16_t>& v) {
      return cuda::PagedKvView{.k = reinterpret_cast<__nv_bfloat16*>(k.data()),
                               .v = reinterpret_cast<__nv_bfloat16*>(v.data()),
                               .num_blocks = kBlocks,
                               .num_kv_heads = kKvHeads,
                               .block_size = block_size,
                               .head_dim = kDim};
    };
    cuda::DecodeLinearParams p{.x_f32 = d_x.data(), .bias = d_bias.data(), .y = y_ref.data(), .m = m, .n = kN, .k = kK};
    ASSERT_EQ(launch(p), cudaSuccess);
    ASSERT_EQ(cuda::LaunchRotaryKvWrite({.qkv = y_ref.data(),
                                         .positions = d_pos.data(),
                                         .slots = d_slots.data(),
                                         .inv_freq = d_freq.data(),
                                         .cache = view(k_ref, v_ref),
                                         .tokens = m,
                                         .num_heads = kHeads,
                                         .num_kv_heads = kKvHeads,
                                         .head_dim = kDim},
                                        nullptr),
              cudaSuccess);
    p.y = y_fused.data();
    p.epilogue = cuda::DecodeEpilogue::kRotaryKv;
    p.rotary = {.positions = d_pos.data(),
                .slots = d_slots.data(),
                .inv_freq = d_freq.data(),
                .cache = view(k_fused, v_fused),
                .num_heads = kHeads};
    ASSERT_EQ(launch(p), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto q_ref = Download(y_ref), q_fused = Download(y_fused);
    for (int32_t r = 0; r < m; ++r)
      for (int32_t col = 0; col < kHeads * kDim; ++col) {
        const size_t at = static_cast<size_t>(r) * kN + col;
        ASSERT_NEAR(q_fused[at], q_ref[at], 1e-5 * (1.0 + std::abs(q_ref[at]))) << "row " << r << " q column " << col;
      }
    for (auto [ref, fused] : {std::pair{&k_ref, &k_fused}, std::pair{&v_ref, &v_fused}}) {
      const auto a = Download(*ref), b = Download(*fused);
      int changed = 0;
      for (size_t i = 0; i < plane; ++i) {
        changed += a[i] != cache0[i];
        ASSERT_NEAR(Bf16ToFloat(b[i]), Bf16ToFloat(a[i]), std::abs(Bf16ToFloat(a[i])) / 128.0) << "cache element " << i;
      }
      EXPECT_GT(changed, 0) << "the reference wrote nothing";
    }
  }
}

}  // namespace ernie::testing
