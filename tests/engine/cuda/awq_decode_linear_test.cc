// The fused decode linear on AWQ int4 weights (kernels/awq_decode_linear.h)
// against a float64 host computation of the same formula on the exact
// dequantised weights (awq_test_case.h's own unpacking): every row count
// 1..8, each prologue (float32 or bf16 input, RMS norm, gathered rows),
// each epilogue (store, residual add, SiLU-and-mul with its gate/up tile
// pairing, and the rotary + KV write against rotary_kv_write's kernel),
// groups 32, 64 and 128, widths that leave partial tiles. The kernel rounds
// its (normalised) input rows to bf16 once, so the host does too. Bad
// parameters launch nothing.
#include "engine/backend/cuda/kernels/awq_decode_linear.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/kernels/awq_repack.h"
#include "engine/backend/cuda/kernels/rotary_kv_write.h"
#include "engine/util/half.h"
#include "tests/engine/cuda/awq_test_case.h"
#include "tests/engine/cuda/backend_runner.h"

namespace ernie::testing {
namespace {

using cuda::DecodeEpilogue;
using cuda::DecodeLinearParams;

template <typename T>
T* Upload(const std::vector<T>& host) {
  T* dev = nullptr;
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dev, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return dev;
}

template <typename T>
std::vector<T> Download(const T* dev, size_t n) {
  std::vector<T> host(n);
  EXPECT_EQ(cudaMemcpy(host.data(), dev, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

// A repacked AWQ linear on the device; frees itself.
struct DeviceAwqLinear {
  explicit DeviceAwqLinear(const AwqCase& c) {
    auto repacked = cuda::RepackAwqLinear(c.Raw());
    EXPECT_TRUE(repacked.ok()) << repacked.status();
    packed = Upload(repacked->packed);
    records = Upload(repacked->records);
    view = {.packed = packed, .records = records, .n = c.n, .k = c.k, .group_size = c.group};
  }
  ~DeviceAwqLinear() {
    cudaFree(packed);
    cudaFree(records);
  }
  uint32_t* packed = nullptr;
  uint32_t* records = nullptr;
  cuda::AwqWeightsView view;
};

struct Case {
  int32_t m, n, k, group;
  DecodeEpilogue epilogue;
  bool bf16_input, norm, gather, bias;
};

std::string Name(const Case& c) {
  return absl::StrCat("m=", c.m, " n=", c.n, " k=", c.k, " group=", c.group, " epilogue=", static_cast<int>(c.epilogue),
                      " bf16_input=", c.bf16_input, " norm=", c.norm, " gather=", c.gather, " bias=", c.bias);
}

void RunCase(const Case& c) {
  SCOPED_TRACE(Name(c));
  std::mt19937 rng(static_cast<uint32_t>(c.m * 7919 + c.n * 31 + c.k + c.group));
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const AwqCase awq = MakeAwqCase(c.n, c.k, c.group, rng);
  const int32_t source_rows = c.gather ? c.m + 3 : c.m;
  std::vector<float> x(static_cast<size_t>(source_rows) * c.k), norm_w(static_cast<size_t>(c.k)),
      bias(static_cast<size_t>(c.n));
  std::vector<uint16_t> x_bf(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    x_bf[i] = FloatToBf16(uni(rng) * 3.0f);
    x[i] = c.bf16_input ? Bf16ToFloat(x_bf[i]) : uni(rng) * 3.0f;
  }
  for (auto& v : norm_w) v = 0.5f + uni(rng);
  for (auto& v : bias) v = uni(rng);
  std::vector<int32_t> rows(static_cast<size_t>(c.m));
  for (int32_t r = 0; r < c.m; ++r) rows[static_cast<size_t>(r)] = c.gather ? (r * 5 + 2) % source_rows : r;
  const int32_t out_width = c.epilogue == DecodeEpilogue::kSiluMul ? c.n / 2 : c.n;
  std::vector<float> y0(static_cast<size_t>(c.m) * out_width);
  for (auto& v : y0) v = uni(rng);  // the residual stream for kAddResidual; overwritten otherwise

  // Host reference in float64 on the input rows as the kernel rounds them.
  std::vector<double> expect(y0.size());
  for (int32_t r = 0; r < c.m; ++r) {
    const float* xr = x.data() + static_cast<size_t>(rows[static_cast<size_t>(r)]) * c.k;
    std::vector<double> in(xr, xr + c.k);
    double scale = 1.0;
    if (c.norm) {
      double ss = 0;
      for (double v : in) ss += v * v;
      scale = 1.0 / std::sqrt(ss / c.k + 1e-5);
    }
    for (int32_t i = 0; i < c.k; ++i) {
      const auto at = static_cast<size_t>(i);
      const double v = c.norm ? norm_w[at] * (in[at] * scale) : in[at];
      in[at] = Bf16ToFloat(FloatToBf16(static_cast<float>(v)));
    }
    std::vector<double> dot(static_cast<size_t>(c.n));
    for (int32_t o = 0; o < c.n; ++o) {
      double d = c.bias ? bias[static_cast<size_t>(o)] : 0.0;
      for (int32_t i = 0; i < c.k; ++i) d += in[static_cast<size_t>(i)] * awq.w[static_cast<size_t>(o) * c.k + i];
      dot[static_cast<size_t>(o)] = d;
    }
    for (int32_t o = 0; o < out_width; ++o) {
      const size_t at = static_cast<size_t>(r) * out_width + o;
      switch (c.epilogue) {
        case DecodeEpilogue::kStore:
          expect[at] = dot[static_cast<size_t>(o)];
          break;
        case DecodeEpilogue::kAddResidual:
          expect[at] = y0[at] + dot[static_cast<size_t>(o)];
          break;
        case DecodeEpilogue::kSiluMul: {
          const double g = dot[static_cast<size_t>(o)], u = dot[static_cast<size_t>(o + out_width)];
          expect[at] = g / (1.0 + std::exp(-g)) * u;
          break;
        }
        case DecodeEpilogue::kRotaryKv:
          FAIL() << "kRotaryKv has its own test";
      }
    }
  }

  const DeviceAwqLinear w(awq);
  float* d_x = c.bf16_input ? nullptr : Upload(x);
  uint16_t* d_xbf = c.bf16_input ? Upload(x_bf) : nullptr;
  float* d_norm = Upload(norm_w);
  float* d_bias = Upload(bias);
  int32_t* d_rows = Upload(rows);
  float* d_y = Upload(y0);
  const DecodeLinearParams p{.x_f32 = d_x,
                             .x_bf16 = reinterpret_cast<const __nv_bfloat16*>(d_xbf),
                             .row_index = c.gather ? d_rows : nullptr,
                             .norm_weight = c.norm ? d_norm : nullptr,
                             .eps = 1e-5f,
                             .bias = c.bias ? d_bias : nullptr,
                             .y = d_y,
                             .m = c.m,
                             .n = c.n,
                             .k = c.k,
                             .epilogue = c.epilogue};
  ASSERT_EQ(cuda::LaunchAwqDecodeLinear(p, w.view, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto got = Download(d_y, y0.size());
  // Exact products summed in float32 (tensor cores), scaled per group: well
  // under 1e-4 of the sums' size; an input element rounded to the other
  // bf16 neighbour (float32 norm vs the host's float64) moves a sum by far
  // less than the bound. A wrong row, tile or group is off by O(1).
  const double tol = 1e-4 * std::sqrt(static_cast<double>(c.k));
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], expect[i], tol * (1.0 + std::abs(expect[i]))) << "output " << i;
  for (void* ptr : {static_cast<void*>(d_x), static_cast<void*>(d_xbf), static_cast<void*>(d_norm),
                    static_cast<void*>(d_bias), static_cast<void*>(d_rows), static_cast<void*>(d_y)})
    cudaFree(ptr);
}

TEST(AwqDecodeLinearTest, MatchesTheHostFormulaForEveryRowCountAndFusion) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  ASSERT_EQ(cuda::PrepareAwqDecodeLinear(3072, 8), cudaSuccess);
  for (int32_t m = 1; m <= cuda::kDecodeLinearMaxRows; ++m) {
    RunCase({m, 2560, 1024, 128, DecodeEpilogue::kStore, false, true, m % 2 == 0, m % 3 == 0});
    RunCase({m, 1024, 1024, 128, DecodeEpilogue::kAddResidual, true, false, false, true});
    RunCase({m, 6144, 1024, 128, DecodeEpilogue::kSiluMul, false, true, false, m % 2 == 1});
    RunCase({m, 1024, 3072, 128, DecodeEpilogue::kAddResidual, false, false, false, m == 8});
  }
  // Groups of 32 and 64, widths that leave partial tiles and CTAs, k not a
  // multiple of the 256-k chunk, gathered rows.
  RunCase({1, 200, 320, 64, DecodeEpilogue::kStore, false, true, false, true});
  RunCase({3, 96, 448, 32, DecodeEpilogue::kSiluMul, false, true, true, true});
  RunCase({7, 1000, 1344, 64, DecodeEpilogue::kAddResidual, false, true, true, false});
  RunCase({5, 2080, 512, 32, DecodeEpilogue::kSiluMul, true, false, false, false});
}

// kRotaryKv is kStore (bias included) followed by rotary_kv_write's kernel:
// q rotated in y, k rotated and v as they are in the paged cache at each
// row's slot, for 1, 3 and 8 rows at scattered positions and slots.
TEST(AwqDecodeLinearTest, RotaryKvEpilogueEqualsTheRotaryKernel) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  constexpr int32_t kHeads = 4, kKvHeads = 2, kDim = 16, kK = 256, kBlock = 4, kBlocks = 16;
  constexpr int32_t kN = (kHeads + 2 * kKvHeads) * kDim;
  const size_t plane = size_t{kBlocks} * kKvHeads * kBlock * kDim;
  std::mt19937 rng(99);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> inv_freq(kDim / 2);
  for (int i = 0; i < kDim / 2; ++i) inv_freq[static_cast<size_t>(i)] = std::pow(10000.0f, -2.0f * i / kDim);
  const AwqCase awq = MakeAwqCase(kN, kK, 64, rng);
  const DeviceAwqLinear w(awq);
  for (const int32_t m : {1, 3, 8}) {
    SCOPED_TRACE(absl::StrCat("m=", m));
    std::vector<float> x(static_cast<size_t>(m) * kK), bias(kN);
    std::vector<uint16_t> cache0(plane);
    for (auto& v : x) v = uni(rng) * 3.0f;
    for (auto& v : bias) v = uni(rng);
    for (auto& v : cache0) v = FloatToBf16(uni(rng));
    std::vector<int32_t> positions(static_cast<size_t>(m)), slots(static_cast<size_t>(m));
    for (int32_t r = 0; r < m; ++r) {
      positions[static_cast<size_t>(r)] = 3 + 997 * r;
      slots[static_cast<size_t>(r)] = (r * 11 + 5) % (kBlocks * kBlock);
    }
    float* d_x = Upload(x);
    float* d_bias = Upload(bias);
    float* d_freq = Upload(inv_freq);
    int32_t* d_pos = Upload(positions);
    int32_t* d_slots = Upload(slots);
    std::vector<float> y0(static_cast<size_t>(m) * kN, 0.0f);
    float* y_ref = Upload(y0);
    float* y_fused = Upload(y0);
    uint16_t* k_ref = Upload(cache0);
    uint16_t* v_ref = Upload(cache0);
    uint16_t* k_fused = Upload(cache0);
    uint16_t* v_fused = Upload(cache0);
    auto view = [&](uint16_t* k, uint16_t* v) {
      return cuda::PagedKvView{.k = reinterpret_cast<__nv_bfloat16*>(k),
                               .v = reinterpret_cast<__nv_bfloat16*>(v),
                               .num_blocks = kBlocks,
                               .num_kv_heads = kKvHeads,
                               .block_size = kBlock,
                               .head_dim = kDim};
    };
    DecodeLinearParams p{.x_f32 = d_x, .bias = d_bias, .y = y_ref, .m = m, .n = kN, .k = kK};
    ASSERT_EQ(cuda::LaunchAwqDecodeLinear(p, w.view, nullptr), cudaSuccess);
    ASSERT_EQ(cuda::LaunchRotaryKvWrite({.qkv = y_ref,
                                         .positions = d_pos,
                                         .slots = d_slots,
                                         .inv_freq = d_freq,
                                         .cache = view(k_ref, v_ref),
                                         .tokens = m,
                                         .num_heads = kHeads,
                                         .num_kv_heads = kKvHeads,
                                         .head_dim = kDim},
                                        nullptr),
              cudaSuccess);
    p.y = y_fused;
    p.epilogue = DecodeEpilogue::kRotaryKv;
    p.rotary = {
        .positions = d_pos, .slots = d_slots, .inv_freq = d_freq, .cache = view(k_fused, v_fused), .num_heads = kHeads};
    ASSERT_EQ(cuda::LaunchAwqDecodeLinear(p, w.view, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto q_ref = Download(y_ref, y0.size()), q_fused = Download(y_fused, y0.size());
    for (int32_t r = 0; r < m; ++r)
      for (int32_t col = 0; col < kHeads * kDim; ++col) {
        const size_t at = static_cast<size_t>(r) * kN + col;
        ASSERT_NEAR(q_fused[at], q_ref[at], 1e-5 * (1.0 + std::abs(q_ref[at]))) << "row " << r << " q column " << col;
      }
    for (auto [ref, fused] : {std::pair{k_ref, k_fused}, std::pair{v_ref, v_fused}}) {
      const auto a = Download(ref, plane), b = Download(fused, plane);
      int changed = 0;
      for (size_t i = 0; i < plane; ++i) {
        changed += a[i] != cache0[i];
        ASSERT_NEAR(Bf16ToFloat(b[i]), Bf16ToFloat(a[i]), std::abs(Bf16ToFloat(a[i])) / 128.0) << "cache element " << i;
      }
      EXPECT_GT(changed, 0) << "the reference wrote nothing";
    }
    for (void* ptr : {static_cast<void*>(d_x), static_cast<void*>(d_bias), static_cast<void*>(d_freq),
                      static_cast<void*>(d_pos), static_cast<void*>(d_slots), static_cast<void*>(y_ref),
                      static_cast<void*>(y_fused), static_cast<void*>(k_ref), static_cast<void*>(v_ref),
                      static_cast<void*>(k_fused), static_cast<void*>(v_fused)})
      cudaFree(ptr);
  }
}

TEST(AwqDecodeLinearTest, BadParametersLaunchNothing) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  std::mt19937 rng(5);
  const AwqCase awq = MakeAwqCase(64, 128, 64, rng);
  const DeviceAwqLinear w(awq);
  float* y = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&y), 1024 * sizeof(float)), cudaSuccess);
  const DecodeLinearParams ok{.x_f32 = y, .y = y + 512, .m = 1, .n = 64, .k = 128};
  EXPECT_EQ(cuda::LaunchAwqDecodeLinear(ok, w.view, nullptr), cudaSuccess);
  auto bad = ok;
  bad.m = 9;  // more rows than the kernel holds
  EXPECT_EQ(cuda::LaunchAwqDecodeLinear(bad, w.view, nullptr), cudaErrorInvalidValue);
  bad = ok;
  bad.k = 64;  // not the weights' k
  EXPECT_EQ(cuda::LaunchAwqDecodeLinear(bad, w.view, nullptr), cudaErrorInvalidValue);
  bad = ok;
  bad.x_bf16 = reinterpret_cast<const __nv_bfloat16*>(y);  // two inputs
  EXPECT_EQ(cuda::LaunchAwqDecodeLinear(bad, w.view, nullptr), cudaErrorInvalidValue);
  bad = ok;
  bad.epilogue = DecodeEpilogue::kRotaryKv;  // without positions, slots or a cache
  EXPECT_EQ(cuda::LaunchAwqDecodeLinear(bad, w.view, nullptr), cudaErrorInvalidValue);
  cuda::AwqWeightsView no_records = w.view;
  no_records.records = nullptr;
  EXPECT_EQ(cuda::LaunchAwqDecodeLinear(ok, no_records, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaFree(y);
}

}  // namespace
}  // namespace ernie::testing
