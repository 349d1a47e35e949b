// The small-M linear kernels (kernels/gemv_bf16, small_batch_gemm, awq_gemm) against
// a CPU reference written here: bf16 x bf16 dot products and AutoAWQ
// dequantisation (unpacked straight from the AutoAWQ tensors with the
// documented nibble order, independently of awq_repack.cc), on odd sizes
// from a fixed seed.
//
// Tolerance of a float32 result y = sum_k x_k w_k: every product of a bf16
// x and a bf16 (or exact AWQ (q - z)) weight is exact in float32, so the
// only error is the float32 additions (and, for AWQ, one scale multiply per
// 32-k partial). Whatever order the tensor cores and the k-slice sum use,
// each of the <= k + k/32 + 8 roundings moves the sum by at most one float32
// ulp (2^-23, truncation included) of a partial sum bounded by S = sum_k
// |x_k w_k|, so |y - ref| <= (k + k/16 + 8) 2^-23 S. The reference adds in
// double. A wrong k mapping or scale is an error of order S, thousands of
// times larger. A bf16 output adds one bf16 rounding: 2^-8 |ref|.
// The dequantised bf16 weights are exact: bf16((q - z) s) with the product
// exact in float32, so they must equal the reference bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/kernels/awq_gemm.h"
#include "engine/backend/cuda/kernels/awq_repack.h"
#include "engine/backend/cuda/kernels/gemv_bf16.h"
#include "engine/backend/cuda/kernels/grouped_awq_gemm.h"
#include "engine/backend/cuda/kernels/small_batch_gemm.h"
#include "engine/backend/cuda/kernels/tensor_map.h"
#include "engine/util/half.h"
#include "tests/engine/cuda/awq_test_case.h"
#include "tests/engine/cuda/backend_runner.h"
#include "tests/engine/cuda/device_copies.h"
#include "tests/engine/cuda/random_inputs.h"

namespace ernie::testing {
namespace {

using cuda::DeviceBuffer;

// A [rows, cols] float32 result from the device, float or bf16.
std::vector<float> DownloadOutput(const DeviceBuffer<float>& y, cuda::LinearOutput out, size_t count) {
  const auto raw = Download(y);
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i)
    values[i] =
        out == cuda::LinearOutput::kF32 ? raw[i] : Bf16ToFloat(reinterpret_cast<const uint16_t*>(raw.data())[i]);
  return values;
}

// y = x w^T in double from float32 values, and S = sum |x w| per element.
struct Reference {
  std::vector<double> y, abs_sum;
};
Reference ReferenceLinear(const std::vector<float>& x, const std::vector<float>& w, int m, int n, int k) {
  Reference r{std::vector<double>(static_cast<size_t>(m) * n), std::vector<double>(static_cast<size_t>(m) * n)};
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double sum = 0, abs_sum = 0;
      const float* xr = x.data() + static_cast<size_t>(i) * k;
      const float* wr = w.data() + static_cast<size_t>(j) * k;
      for (int t = 0; t < k; ++t) {
        const double prod = static_cast<double>(xr[t]) * wr[t];
        sum += prod;
        abs_sum += std::fabs(prod);
      }
      r.y[static_cast<size_t>(i) * n + j] = sum;
      r.abs_sum[static_cast<size_t>(i) * n + j] = abs_sum;
    }
  return r;
}

// Largest error of `got` over its allowed bound (see the file comment): <= 1 passes.
double WorstErrorRatio(const std::vector<float>& got, const Reference& ref, int k, cuda::LinearOutput out) {
  double worst = 0;
  const double additions = k + k / 16.0 + 8;
  for (size_t i = 0; i < got.size(); ++i) {
    double bound = additions * std::ldexp(1.0, -23) * ref.abs_sum[i] + 1e-30;
    if (out == cuda::LinearOutput::kBf16) bound += std::ldexp(std::fabs(ref.y[i]), -8);
    worst = std::max(worst, std::fabs(got[i] - ref.y[i]) / bound);
  }
  return worst;
}

std::vector<float> ToFloat(const std::vector<uint16_t>& bf16) {
  std::vector<float> out(bf16.size());
  for (size_t i = 0; i < bf16.size(); ++i) out[i] = Bf16ToFloat(bf16[i]);
  return out;
}

TEST(GemvBf16Test, MatchesTheReferenceOnOddSizes) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  std::mt19937 gen(1234);
  for (int n : {8, 24, 333, 1000, 2560})
    for (int k : {8, 128, 384, 1000, 1024}) {
      const auto w_bf16 = RandomBf16(static_cast<size_t>(n) * k, gen);
      const auto w = Upload(w_bf16);
      const auto w_f = ToFloat(w_bf16);
      for (int m : {1, 3, 7, 8, 16, 29}) {
        SCOPED_TRACE(::testing::Message() << "m=" << m << " n=" << n << " k=" << k);
        const auto x_bf16 = RandomBf16(static_cast<size_t>(m) * k, gen);
        const auto x = Upload(x_bf16);
        const Reference ref = ReferenceLinear(ToFloat(x_bf16), w_f, m, n, k);
        for (auto out : {cuda::LinearOutput::kF32, cuda::LinearOutput::kBf16}) {
          if (out == cuda::LinearOutput::kBf16 && m != 3 && m != 16) continue;  // one row count per tile count
          auto y = DeviceBuffer<float>::Allocate(static_cast<size_t>(m) * n, "y");
          ASSERT_TRUE(y.ok());
          const cuda::GemvBf16Params p{.x = reinterpret_cast<const __nv_bfloat16*>(x.data()),
                                       .w = reinterpret_cast<const __nv_bfloat16*>(w.data()),
                                       .y = y->data(),
                                       .m = m,
                                       .n = n,
                                       .k = k,
                                       .out = out};
          ASSERT_EQ(cuda::LaunchGemvBf16(p, nullptr), cudaSuccess);
          EXPECT_LE(WorstErrorRatio(DownloadOutput(*y, out, ref.y.size()), ref, k, out), 1.0)
              << (out == cuda::LinearOutput::kF32 ? "float32" : "bf16") << " output";
        }
      }
    }
}

TEST(GemvBf16Test, RejectsBadParameters) {
  // Checked before any CUDA call, so this runs without a device too.
  alignas(16) static uint16_t data[64] = {};
  const auto* x = reinterpret_cast<const __nv_bfloat16*>(data);
  const cuda::GemvBf16Params ok{.x = x, .w = x, .y = data, .m = 1, .n = 1, .k = 8};
  auto bad = [&](auto edit) {
    cuda::GemvBf16Params p = ok;
    edit(p);
    return cuda::LaunchGemvBf16(p, nullptr);
  };
  EXPECT_EQ(bad([](auto& p) { p.m = 0; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.m = cuda::kGemvMaxRows + 1; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.k = 12; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.n = 0; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.w = nullptr; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([&](auto& p) { p.x = x + 1; }), cudaErrorInvalidValue);  // 2-byte aligned only
}

// ---- Small-batch GEMM (k split over a cluster) ----

struct GemmShape {
  int n, k;
};

// Every shape and x row count given: float32 and bf16 outputs, the same
// bits from a second launch (rank-order sums), and y += x W^T onto a nonzero
// y. m = 17 reads rows of x inside a wider matrix.
void ExpectSmallBatchGemmMatchesTheReference(const std::vector<GemmShape>& shapes, const std::vector<int>& row_counts) {
  std::mt19937 gen(4321);
  for (const GemmShape shape : shapes) {
    const int n = shape.n, k = shape.k;
    const auto w_bf16 = RandomBf16(static_cast<size_t>(n) * k, gen);
    const auto w = Upload(w_bf16);
    const auto w_f = ToFloat(w_bf16);
    for (int m : row_counts) {
      const int x_stride = m == 17 ? k + 24 : k;  // a column block of a wider matrix
      SCOPED_TRACE(::testing::Message() << "m=" << m << " n=" << n << " k=" << k << " x_stride=" << x_stride);
      const auto x_bf16 = RandomBf16(static_cast<size_t>(m) * x_stride, gen);
      std::vector<float> x_f(static_cast<size_t>(m) * k);
      for (int i = 0; i < m; ++i)
        for (int t = 0; t < k; ++t)
          x_f[static_cast<size_t>(i) * k + t] = Bf16ToFloat(x_bf16[static_cast<size_t>(i) * x_stride + t]);
      const auto x = Upload(x_bf16);
      Reference ref = ReferenceLinear(x_f, w_f, m, n, k);
      const cuda::SmallBatchGemmParams base{.x = reinterpret_cast<const __nv_bfloat16*>(x.data()),
                                            .w = reinterpret_cast<const __nv_bfloat16*>(w.data()),
                                            .m = m,
                                            .n = n,
                                            .k = k,
                                            .x_stride = x_stride};
      for (auto out : {cuda::LinearOutput::kF32, cuda::LinearOutput::kBf16}) {
        auto y = DeviceBuffer<float>::Allocate(static_cast<size_t>(m) * n, "y");
        ASSERT_TRUE(y.ok());
        cuda::SmallBatchGemmParams p = base;
        p.y = y->data();
        p.out = out;
        ASSERT_EQ(cuda::LaunchSmallBatchGemm(p, nullptr), cudaSuccess);
        const auto first = Download(*y);
        EXPECT_LE(WorstErrorRatio(DownloadOutput(*y, out, ref.y.size()), ref, k, out), 1.0)
            << (out == cuda::LinearOutput::kF32 ? "float32" : "bf16") << " output";
        // The slices are summed in rank order: a second launch gives the same bits.
        ASSERT_EQ(cuda::LaunchSmallBatchGemm(p, nullptr), cudaSuccess);
        EXPECT_EQ(Download(*y), first);
      }
      // y += x W^T onto a nonzero y.
      std::vector<float> y0(static_cast<size_t>(m) * n);
      std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
      for (auto& v : y0) v = dist(gen);
      auto y = Upload(y0);
      cuda::SmallBatchGemmParams p = base;
      p.y = y.data();
      p.accumulate = true;
      ASSERT_EQ(cuda::LaunchSmallBatchGemm(p, nullptr), cudaSuccess);
      for (size_t i = 0; i < y0.size(); ++i) {
        ref.y[i] += y0[i];
        ref.abs_sum[i] += std::fabs(y0[i]);
      }
      EXPECT_LE(WorstErrorRatio(Download(y), ref, k, cuda::LinearOutput::kF32), 1.0) << "accumulated output";
    }
  }
}

// Every k-slice count (1 - 8 CTAs a cluster, slices of 64 - 512; k = 192 is
// three 64-wide chunks in one slice), every wgmma width (x rows padded to 16
// / 32 / 64 / 128), a second block of x rows on grid z (m > 128), a partial
// last row tile, rows of x inside a wider matrix, and the three outputs.
TEST(SmallBatchGemmTest, MatchesTheReferenceOnEverySliceAndTileCount) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  ExpectSmallBatchGemmMatchesTheReference({{24, 128}, {200, 192}, {333, 384}, {1000, 1024}, {2560, 1024}, {1024, 3072},
                                           {100, 4096}, {1024, 2048}},
                                          {1, 3, 16, 17, 29, 33, 64, 100, 129, 256});
}

TEST(SmallBatchGemmTest, RejectsBadParameters) {
  // Checked before any CUDA call, so this runs without a device too.
  alignas(16) static uint16_t data[64] = {};
  const auto* x = reinterpret_cast<const __nv_bfloat16*>(data);
  const cuda::SmallBatchGemmParams ok{.x = x, .w = x, .y = data, .m = 1, .n = 1, .k = 64};
  auto bad = [&](auto edit) {
    cuda::SmallBatchGemmParams p = ok;
    edit(p);
    return cuda::LaunchSmallBatchGemm(p, nullptr);
  };
  EXPECT_EQ(bad([](auto& p) { p.m = 0; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.m = cuda::kSmallBatchGemmMaxRows + 1; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.k = 96; }), cudaErrorInvalidValue);    // not a multiple of 64
  EXPECT_EQ(bad([](auto& p) { p.k = 4160; }), cudaErrorInvalidValue);  // more than 8 slices of 512
  EXPECT_EQ(bad([](auto& p) { p.n = 0; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.x_stride = 56; }), cudaErrorInvalidValue);  // shorter than k
  EXPECT_EQ(bad([](auto& p) { p.x_stride = 68; }), cudaErrorInvalidValue);  // rows not 16-byte aligned
  EXPECT_EQ(bad([](auto& p) { p.w = nullptr; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([&](auto& p) { p.x = x + 1; }), cudaErrorInvalidValue);  // 2-byte aligned only
  EXPECT_EQ(bad([](auto& p) {
              p.accumulate = true;
              p.out = cuda::LinearOutput::kBf16;
            }),
            cudaErrorInvalidValue);
  // The TMA descriptor's own rules, also checked before any CUDA call.
  CUtensorMap map;
  EXPECT_EQ(cuda::EncodeBf16TensorMap128B(&map, x + 1, 4, 64, 64, 32), cudaErrorInvalidValue);  // base alignment
  EXPECT_EQ(cuda::EncodeBf16TensorMap128B(&map, x, 4, 64, 68, 32), cudaErrorInvalidValue);  // row bytes % 16
  EXPECT_EQ(cuda::EncodeBf16TensorMap128B(&map, x, 4, 64, 32, 32), cudaErrorInvalidValue);  // stride < columns
  EXPECT_EQ(cuda::EncodeBf16TensorMap128B(&map, x, 4, 64, 64, 257), cudaErrorInvalidValue);  // box rows
  EXPECT_EQ(cuda::EncodeBf16TensorMap128B(&map, x, 0, 64, 64, 32), cudaErrorInvalidValue);
  EXPECT_TRUE(cuda::SmallBatchGemmSupports(2560, 1024));
  EXPECT_TRUE(cuda::SmallBatchGemmSupports(200, 192));
  EXPECT_FALSE(cuda::SmallBatchGemmSupports(2560, 1000));
  EXPECT_FALSE(cuda::SmallBatchGemmSupports(1024, 576));   // 9 slices of 64, no larger slice divides it
  EXPECT_FALSE(cuda::SmallBatchGemmSupports(1024, 1344));  // 21 of 64
  EXPECT_TRUE(cuda::SmallBatchGemmSupports(1024, 640));    // 5 of 128
  EXPECT_TRUE(cuda::SmallBatchGemmSupports(1024, 3072));   // 6 of 512
  EXPECT_TRUE(cuda::SmallBatchGemmSupports(6144, 1024, cuda::SmallBatchEpilogue::kSiluMul));
  EXPECT_FALSE(cuda::SmallBatchGemmSupports(96, 1024, cuda::SmallBatchEpilogue::kSiluMul));
}

// ---- AWQ ----

struct DeviceAwq {
  DeviceBuffer<uint32_t> packed, records;
  cuda::AwqWeightsView view;
};
DeviceAwq UploadAwq(const AwqCase& c) {
  auto packed = cuda::RepackAwqLinear(c.Raw());
  EXPECT_TRUE(packed.ok()) << packed.status();
  DeviceAwq d{Upload(packed->packed), Upload(packed->records), {}};
  d.view = {.packed = d.packed.data(), .records = d.records.data(), .n = c.n, .k = c.k, .group_size = c.group};
  return d;
}

TEST(AwqRepackTest, EveryNibbleSitsWhereTheHeaderSays) {
  std::mt19937 gen(7);
  for (int group : {32, 64, 128}) {
    const AwqCase c = MakeAwqCase(24, 384, group, gen);
    auto repacked = cuda::RepackAwqLinear(c.Raw());
    ASSERT_TRUE(repacked.ok()) << repacked.status();
    ASSERT_EQ(static_cast<int64_t>(repacked->packed.size()), cuda::AwqPackedWords(24, 384));
    ASSERT_EQ(static_cast<int64_t>(repacked->records.size()), cuda::AwqRecordWords(24, 384, group));
    const int blocks = 384 / 64, groups2 = (384 / group + 1) / 2 * 2;
    int wrong = 0;
    for (int row = 0; row < 32; ++row)  // 24 real rows and 8 padding rows
      for (int kk = 0; kk < 384; ++kk) {
        // awq_gemm.h: k = 64 block + 32 half + 8c + 2p + i; row = 16 tile + g + 8 (j % 2), half = j / 2.
        const int tile = row / 16, g = row % 8, half = kk % 64 / 32, c4 = kk % 32 / 8, p = kk % 8 / 2, i = kk % 2;
        const uint32_t word = repacked->packed[((static_cast<size_t>(tile) * blocks + kk / 64) * 32 + 4 * g + c4) * 4 +
                                               2 * half + row % 16 / 8];
        const uint32_t rec =
            repacked->records[((static_cast<size_t>(tile) * 8 + g) * groups2 + kk / group) * 2 + row % 16 / 8];
        const int q = static_cast<int>((word >> (4 * p + 16 * i)) & 0xF);
        const int z = static_cast<int>(rec >> 16) - 0x4300;
        const float w = static_cast<float>(q - z) * F16ToFloat(static_cast<uint16_t>(rec & 0xffff));
        const float want = row < 24 ? c.w[static_cast<size_t>(row) * 384 + kk] : 0.0f;
        wrong += w != want;
      }
    EXPECT_EQ(wrong, 0) << "group " << group;
  }
}

TEST(AwqRepackTest, RejectsInconsistentTensors) {
  std::mt19937 gen(8);
  const AwqCase c = MakeAwqCase(16, 128, 64, gen);
  auto expect_error = [](cuda::AwqRawLinear raw, const char* fragment) {
    auto p = cuda::RepackAwqLinear(raw);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(p.status().message()).find(fragment), std::string::npos) << p.status();
  };
  cuda::AwqRawLinear raw = c.Raw();
  raw.n = 12;
  expect_error(raw, "n=12");
  raw = c.Raw();
  raw.group_size = 48;
  expect_error(raw, "group_size=48");
  raw = c.Raw();
  raw.k = 96;
  expect_error(raw, "k=96");
  raw = c.Raw();
  raw.qweight = raw.qweight.subspan(1);
  expect_error(raw, "qweight");
  raw = c.Raw();
  raw.qzeros = raw.qzeros.subspan(1);
  expect_error(raw, "qzeros");
  raw = c.Raw();
  raw.scales = raw.scales.subspan(1);
  expect_error(raw, "scales");
}

// Runs the int4 GEMV on the m x k rows at x and returns its worst error
// ratio against ref (WorstErrorRatio: <= 1 passes); a failed allocation or
// launch is a test failure and returns infinity.
template <typename XBuffer>
double AwqGemvWorstErrorRatio(const XBuffer& x, const cuda::AwqWeightsView& w, const Reference& ref, int m,
                              cuda::LinearOutput out, int k_slices, cuda::AwqGemvLoop loop) {
  auto y = DeviceBuffer<float>::Allocate(static_cast<size_t>(m) * w.n, "y");
  if (!y.ok()) {
    ADD_FAILURE() << y.status();
    return std::numeric_limits<double>::infinity();
  }
  const cuda::AwqGemvParams p{.x = reinterpret_cast<const __nv_bfloat16*>(x.data()),
                              .w = w,
                              .y = y->data(),
                              .m = m,
                              .out = out,
                              .k_slices = k_slices,
                              .loop = loop};
  const cudaError_t launched = cuda::LaunchAwqGemv(p, nullptr);
  if (launched != cudaSuccess) {
    ADD_FAILURE() << "LaunchAwqGemv: " << cudaGetErrorString(launched);
    return std::numeric_limits<double>::infinity();
  }
  return WorstErrorRatio(DownloadOutput(*y, out, ref.y.size()), ref, w.k, out);
}

TEST(AwqGemvTest, MatchesTheReferenceOnOddSizes) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  std::mt19937 gen(4321);
  for (int group : {32, 64, 128})
    for (int n : {8, 24, 1000, 2560})
      for (int k : {128, 384, 1024}) {
        const AwqCase c = MakeAwqCase(n, k, group, gen);
        const DeviceAwq w = UploadAwq(c);
        for (int m : {1, 3, 7, 8, 16, 29}) {
          SCOPED_TRACE(::testing::Message() << "m=" << m << " n=" << n << " k=" << k << " group=" << group);
          const auto x_bf16 = RandomBf16(static_cast<size_t>(m) * k, gen);
          const auto x = Upload(x_bf16);
          const Reference ref = ReferenceLinear(ToFloat(x_bf16), c.w, m, n, k);
          for (auto out : {cuda::LinearOutput::kF32, cuda::LinearOutput::kBf16})
            for (auto loop : {cuda::AwqGemvLoop::kRegisters, cuda::AwqGemvLoop::kBulkCopy}) {
              if (out == cuda::LinearOutput::kBf16 && m != 7) continue;
              EXPECT_LE(AwqGemvWorstErrorRatio(x, w.view, ref, m, out, /*k_slices=*/0, loop), 1.0)
                  << (out == cuda::LinearOutput::kF32 ? "float32" : "bf16") << " output, "
                  << (loop == cuda::AwqGemvLoop::kBulkCopy ? "bulk-copy" : "register") << " loop";
            }
        }
      }
}

// The k loop steps in 256-k chunks of four 64-k blocks and applies a scale
// once per 128 k when groups are that long: a last partial chunk (k = 1344,
// 21 blocks), groups longer than a chunk (256) and every k-slice count, with
// x staged in shared memory and read from global memory, through both k
// loops (the bulk-copy one for m <= 8).
TEST(AwqGemvTest, PartialChunksLongGroupsAndEveryKSliceCount) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  std::mt19937 gen(8765);
  struct Shape {
    int k, group;
  };
  for (const Shape shape : {Shape{1344, 64}, Shape{1344, 32}, Shape{2560, 128}, Shape{2560, 256}, Shape{3072, 128}}) {
    const int n = 200;
    const AwqCase c = MakeAwqCase(n, shape.k, shape.group, gen);
    const DeviceAwq w = UploadAwq(c);
    // m <= 8 stages x in shared memory while it fits (k = 3,072 at m = 8 does not).
    for (int m : {1, 8, 13}) {
      const auto x_bf16 = RandomBf16(static_cast<size_t>(m) * shape.k, gen);
      const auto x = Upload(x_bf16);
      const Reference ref = ReferenceLinear(ToFloat(x_bf16), c.w, m, n, shape.k);
      for (int k_slices : {1, 2, 4, 8})
        for (auto loop : {cuda::AwqGemvLoop::kRegisters, cuda::AwqGemvLoop::kBulkCopy}) {
          SCOPED_TRACE(::testing::Message() << "m=" << m << " k=" << shape.k << " group=" << shape.group
                                            << " k_slices=" << k_slices
                                            << " bulk=" << (loop == cuda::AwqGemvLoop::kBulkCopy));
          EXPECT_LE(AwqGemvWorstErrorRatio(x, w.view, ref, m, cuda::LinearOutput::kF32, k_slices, loop), 1.0);
        }
    }
  }
}

// The small-batch GEMM on int4 weights (SmallBatchGemmParams::awq): each
// CTA dequantises its tile into shared memory as bf16((q - z) s), so the
// reference is the bf16 GEMM on those rounded weights. Every group size,
// slice count (k = 128 - 3,072), wgmma width (m = 1 - 129), a partial last
// 16-row tile (n = 200, 1288) and tiles past the weight's rows (n = 24: the
// CTA's tiles 2 and 3 read clamped addresses; their rows are not stored, so
// memcheck is what checks them), both outputs, and the SiLU-and-mul epilogue
// against silu(g) * u of the kernel's own stored sums.
TEST(SmallBatchGemmTest, Int4WeightsMatchTheBf16GemmOnTheirDequantisedValues) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  std::mt19937 gen(1357);
  struct Shape {
    int n, k, group;
  };
  for (const Shape shape : {Shape{24, 128, 32}, Shape{200, 384, 64}, Shape{1024, 1024, 128}, Shape{1288, 1536, 64},
                            Shape{1024, 3072, 128}, Shape{6144, 1024, 128}, Shape{256, 4096, 256}}) {
    const int n = shape.n, k = shape.k;
    const AwqCase c = MakeAwqCase(n, k, shape.group, gen);
    const DeviceAwq w = UploadAwq(c);
    std::vector<float> w_rounded(c.w.size());
    for (size_t i = 0; i < c.w.size(); ++i) w_rounded[i] = Bf16ToFloat(FloatToBf16(c.w[i]));
    for (int m : {1, 5, 16, 17, 33, 64, 100, 129}) {
      SCOPED_TRACE(::testing::Message() << "m=" << m << " n=" << n << " k=" << k << " group=" << shape.group);
      const auto x_bf16 = RandomBf16(static_cast<size_t>(m) * k, gen);
      const auto x = Upload(x_bf16);
      const Reference ref = ReferenceLinear(ToFloat(x_bf16), w_rounded, m, n, k);
      for (auto out : {cuda::LinearOutput::kF32, cuda::LinearOutput::kBf16}) {
        auto y = DeviceBuffer<float>::Allocate(static_cast<size_t>(m) * n, "y");
        ASSERT_TRUE(y.ok());
        const cuda::SmallBatchGemmParams p{.x = reinterpret_cast<const __nv_bfloat16*>(x.data()),
                                           .awq = w.view,
                                           .y = y->data(),
                                           .m = m,
                                           .n = n,
                                           .k = k,
                                           .out = out};
        ASSERT_EQ(cuda::LaunchSmallBatchGemm(p, nullptr), cudaSuccess);
        EXPECT_LE(WorstErrorRatio(DownloadOutput(*y, out, ref.y.size()), ref, k, out), 1.0)
            << (out == cuda::LinearOutput::kF32 ? "float32" : "bf16") << " output";
      }
      if (n % 64 != 0) continue;
      // kSiluMul (n = 2 width: each CTA's 32 gate rows and the matching up
      // rows) against SiLU-and-mul of this kernel's own float32 sums, as
      // small_batch_gemm_epilogue_test checks the bf16 weights' epilogue.
      const int width = n / 2;
      auto sums = DeviceBuffer<float>::Allocate(static_cast<size_t>(m) * n, "sums");
      auto act = DeviceBuffer<float>::Allocate(static_cast<size_t>(m) * width, "act");
      ASSERT_TRUE(sums.ok() && act.ok());
      cuda::SmallBatchGemmParams p{.x = reinterpret_cast<const __nv_bfloat16*>(x.data()),
                                   .awq = w.view,
                                   .y = sums->data(),
                                   .m = m,
                                   .n = n,
                                   .k = k};
      ASSERT_EQ(cuda::LaunchSmallBatchGemm(p, nullptr), cudaSuccess);
      p.epilogue = cuda::SmallBatchEpilogue::kSiluMul;
      p.y = act->data();
      ASSERT_EQ(cuda::LaunchSmallBatchGemm(p, nullptr), cudaSuccess);
      const auto sum = Download(*sums), a = Download(*act);
      for (int r = 0; r < m; ++r)
        for (int j = 0; j < width; ++j) {
          const float g = sum[static_cast<size_t>(r) * n + j], u = sum[static_cast<size_t>(r) * n + width + j];
          const float want = g / (1.0f + std::exp(-g)) * u;
          ASSERT_NEAR(a[static_cast<size_t>(r) * width + j], want, 1e-5 * (1.0 + std::fabs(want)))
              << "SiLU-and-mul, row " << r << " column " << j;
        }
    }
  }
}

TEST(SmallBatchGemmTest, Int4RejectsWeightsThatDoNotMatch) {
  // Checked before any CUDA call, so this runs without a device too.
  alignas(16) static uint32_t words[64] = {};
  alignas(16) static uint16_t data[64] = {};
  const cuda::AwqWeightsView awq{.packed = words, .records = words, .n = 16, .k = 64, .group_size = 64};
  const cuda::SmallBatchGemmParams ok{.x = reinterpret_cast<const __nv_bfloat16*>(data), .awq = awq, .y = data,
                                      .m = 1, .n = 16, .k = 64};
  auto bad = [&](auto edit) {
    cuda::SmallBatchGemmParams p = ok;
    edit(p);
    return cuda::LaunchSmallBatchGemm(p, nullptr);
  };
  EXPECT_EQ(bad([](auto& p) { p.w = reinterpret_cast<const __nv_bfloat16*>(data); }), cudaErrorInvalidValue);  // both
  EXPECT_EQ(bad([](auto& p) { p.awq.n = 24; }), cudaErrorInvalidValue);  // not the linear's n
  EXPECT_EQ(bad([](auto& p) { p.awq.k = 128; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.awq.group_size = 48; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.awq.records = nullptr; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.awq.packed = words + 1; }), cudaErrorInvalidValue);  // 4-byte aligned only
}

// The dense AWQ linear on the tiled int4 GEMM (LaunchAwqTiledGemm): every
// slot-tile size, full and partial last tiles, long groups (one scale per
// 128 k) and both outputs. y has a row of sentinels past m: the kernel must
// leave it alone, since a dense caller's y holds exactly m rows.
TEST(AwqTiledGemmTest, MatchesTheReferenceAndWritesOnlyItsRows) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  std::mt19937 gen(2468);
  struct Shape {
    int n, k, group;
  };
  for (const Shape shape : {Shape{8, 128, 32}, Shape{200, 384, 64}, Shape{1000, 1024, 128}, Shape{1288, 1344, 64}}) {
    const AwqCase c = MakeAwqCase(shape.n, shape.k, shape.group, gen);
    const DeviceAwq w = UploadAwq(c);
    for (int m : {1, 17, 33, 64, 100, 257}) {
      const auto x_bf16 = RandomBf16(static_cast<size_t>(m) * shape.k, gen);
      const auto x = Upload(x_bf16);
      const Reference ref = ReferenceLinear(ToFloat(x_bf16), c.w, m, shape.n, shape.k);
      for (int tile_rows : {16, 32, 64})
        for (auto out : {cuda::LinearOutput::kF32, cuda::LinearOutput::kBf16}) {
          SCOPED_TRACE(::testing::Message() << "m=" << m << " n=" << shape.n << " k=" << shape.k << " group="
                                            << shape.group << " tile_rows=" << tile_rows
                                            << (out == cuda::LinearOutput::kF32 ? " float32" : " bf16"));
          const size_t count = static_cast<size_t>(m) * shape.n;
          auto y = DeviceBuffer<float>::Allocate(count + shape.n, "y");
          ASSERT_TRUE(y.ok());
          ASSERT_EQ(cudaMemset(y->data(), 0xff, y->bytes()), cudaSuccess);
          ASSERT_EQ(cuda::LaunchAwqTiledGemm({.x = reinterpret_cast<const __nv_bfloat16*>(x.data()),
                                              .w = w.view,
                                              .y = y->data(),
                                              .m = m,
                                              .out = out},
                                             tile_rows, nullptr),
                    cudaSuccess);
          EXPECT_LE(WorstErrorRatio(DownloadOutput(*y, out, count), ref, shape.k, out), 1.0);
          const auto raw = Download(*y);
          const size_t written_bytes = count * (out == cuda::LinearOutput::kF32 ? 4 : 2);
          const auto* bytes = reinterpret_cast<const uint8_t*>(raw.data());
          size_t touched = 0;
          for (size_t i = written_bytes; i < raw.size() * 4; ++i) touched += bytes[i] != 0xff;
          EXPECT_EQ(touched, 0u) << "bytes written past row m";
        }
    }
  }
}

TEST(AwqTiledGemmTest, RejectsBadParameters) {
  // Checked before any CUDA call, so this runs without a device too.
  alignas(16) static uint32_t data[64] = {};
  const auto* x = reinterpret_cast<const __nv_bfloat16*>(data);
  const cuda::AwqGemvParams ok{
      .x = x, .w = {.packed = data, .records = data, .n = 16, .k = 64, .group_size = 64}, .y = data, .m = 40};
  auto bad = [&](auto edit, int tile_rows = 64) {
    cuda::AwqGemvParams p = ok;
    edit(p);
    return cuda::LaunchAwqTiledGemm(p, tile_rows, nullptr);
  };
  EXPECT_EQ(bad([](auto& p) { p.m = 0; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.m = 16 * 65536; }, 16), cudaErrorInvalidValue);  // more tiles than a grid's y
  EXPECT_EQ(bad([](auto&) {}, 8), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto&) {}, 48), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.k_slices = 2; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.loop = cuda::AwqGemvLoop::kBulkCopy; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.w.k = 96; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.w.n = 12; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.w.group_size = 128; }), cudaErrorInvalidValue);  // does not divide k = 64
  EXPECT_EQ(bad([&](auto& p) { p.x = x + 1; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.y = nullptr; }), cudaErrorInvalidValue);
}

TEST(AwqDequantizeTest, WritesExactBf16WeightsAndFeedsCublas) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  auto gemm = cuda::Gemm::Create(nullptr);
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  std::mt19937 gen(99);
  for (int group : {32, 64, 128})
    for (int n : {8, 24, 1000, 2560})
      for (int k : {128, 384, 1024}) {
        SCOPED_TRACE(::testing::Message() << "n=" << n << " k=" << k << " group=" << group);
        const AwqCase c = MakeAwqCase(n, k, group, gen);
        const DeviceAwq w = UploadAwq(c);
        // One element more than needed: the kernel must not write past n x k.
        const size_t bytes = cuda::AwqDequantWorkspaceBytes(n, k);
        auto out = DeviceBuffer<uint16_t>::Allocate(bytes / 2 + 1, "dequantised");
        ASSERT_TRUE(out.ok());
        ASSERT_EQ(cudaMemset(out->data(), 0xff, out->bytes()), cudaSuccess);
        auto* out_bf16 = reinterpret_cast<__nv_bfloat16*>(out->data());
        EXPECT_EQ(cuda::LaunchAwqDequantize({.w = w.view, .out = out_bf16, .out_bytes = bytes - 2}, nullptr),
                  cudaErrorInvalidValue);
        ASSERT_EQ(cuda::LaunchAwqDequantize({.w = w.view, .out = out_bf16, .out_bytes = bytes}, nullptr), cudaSuccess);
        const auto got = Download(*out);
        int wrong = 0;
        for (size_t i = 0; i < c.w.size(); ++i) wrong += got[i] != FloatToBf16(c.w[i]);
        EXPECT_EQ(wrong, 0);
        EXPECT_EQ(got.back(), 0xffff) << "wrote past the workspace";
        // The prefill path: dequantised weights through cuBLAS.
        for (int m : {1, 33}) {
          const auto x_bf16 = RandomBf16(static_cast<size_t>(m) * k, gen);
          const auto x = Upload(x_bf16);
          std::vector<float> w_bf16(c.w.size());
          for (size_t i = 0; i < c.w.size(); ++i) w_bf16[i] = Bf16ToFloat(FloatToBf16(c.w[i]));
          const Reference ref = ReferenceLinear(ToFloat(x_bf16), w_bf16, m, n, k);
          auto y = DeviceBuffer<float>::Allocate(static_cast<size_t>(m) * n, "y");
          ASSERT_TRUE(y.ok());
          ASSERT_TRUE(gemm->Run(x.data(), m, k, out->data(), n, y->data(), cuda::GemmOutput::kF32).ok());
          EXPECT_LE(WorstErrorRatio(DownloadOutput(*y, cuda::LinearOutput::kF32, ref.y.size()), ref, k,
                                    cuda::LinearOutput::kF32),
                    1.0)
              << "m=" << m;
        }
      }
}

TEST(AwqGemvTest, RejectsBadParameters) {
  // Checked before any CUDA call, so this runs without a device too.
  alignas(16) static uint32_t data[64] = {};
  const auto* x = reinterpret_cast<const __nv_bfloat16*>(data);
  const cuda::AwqGemvParams ok{
      .x = x, .w = {.packed = data, .records = data, .n = 16, .k = 64, .group_size = 64}, .y = data, .m = 1};
  auto bad = [&](auto edit) {
    cuda::AwqGemvParams p = ok;
    edit(p);
    return cuda::LaunchAwqGemv(p, nullptr);
  };
  EXPECT_EQ(bad([](auto& p) { p.m = 0; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.m = cuda::kGemvMaxRows + 1; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.w.k = 96; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.w.n = 12; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.w.group_size = 48; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.w.group_size = 128; }), cudaErrorInvalidValue);  // does not divide k = 64
  EXPECT_EQ(bad([&](auto& p) { p.w.packed = data + 1; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.y = nullptr; }), cudaErrorInvalidValue);
  EXPECT_EQ(cuda::LaunchAwqDequantize({.w = ok.w, .out = nullptr, .out_bytes = 1 << 20}, nullptr),
            cudaErrorInvalidValue);
}

}  // namespace
}  // namespace ernie::testing
