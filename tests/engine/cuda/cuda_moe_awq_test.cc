// AWQ int4 experts on the CUDA backend:
// - the grouped AWQ expert kernel equals per-expert products computed here
//   from an independent unpack of the AutoAWQ tensors (awq_test_case.h),
//   for tiles of 8, 16, 32 and 64 slots, both epilogues, a routing that
//   leaves experts empty, slots reading their rows through x_row or not;
// - a MoE checkpoint written here (ernie-make-model's library, hidden 128,
//   8 experts of width 64 top 3, two shared experts), quantized here with
//   ernie-quantize's library (RTN; group sizes 64 and 32), gives the CPU
//   reference's teacher-forced logits through every expert path: the
//   grouped kernel (one step, chunks, decode steps replayed as CUDA graphs)
//   and the per-expert dequantise + cuBLAS GEMMs of large steps;
// - --load-format dummy builds the same device bytes as that checkpoint,
//   deterministically, with finite logits;
// - an AWQ MoE model whose widths the int4 kernels cannot take is refused
//   with an error that names the sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/kernels/grouped_awq_gemm.h"
#include "engine/backend/cuda/kernels/grouped_awq_gemv.h"
#include "engine/backend/cuda/kernels/moe_routing.h"
#include "engine/util/half.h"
#include "tests/engine/cuda/awq_test_case.h"
#include "tests/engine/cuda/backend_runner.h"
#include "tests/engine/cuda/device_copies.h"
#include "tests/engine/cuda/dummy_backends.h"
#include "tests/engine/cuda/moe_alignment.h"
#include "tests/engine/cuda/quantized_checkpoints.h"
#include "tools/make_model/model_shape.h"

namespace ernie::testing {
namespace {

using cuda::DeviceBuffer;

// ---- the grouped kernel ----

struct GroupedCase {
  int experts, n, k, group, tile_rows;
  cuda::GroupedEpilogue epilogue;
  bool by_x_row;      // slots read x rows through the alignment's slot_token (gate/up), or row = slot (down)
  bool gemm = false;  // the tiled GEMM (grouped_awq_gemm.h) instead of the GEMV, same parameters
  int k_slices = 0;   // the GEMV's k split (0: its own choice)
  bool dependent = false;  // launched as a programmatic dependent (the MoE's down launch)
  bool wait_first = false;  // the same, waiting before the tile table (the GEMV's gate/up launch)
  int cta_warps = 0;        // the GEMV's warps a CTA (0: its own choice)
  bool skip_padding = false;  // row = slot, padding slots (slot_token -1) read as zero rows (the down launch)
  bool lean = false;          // the GEMV's lean k loop (GroupedAwqGemvParams::lean)
};

void RunGroupedCase(const GroupedCase& gc, std::mt19937& gen) {
  const bool silu = gc.epilogue == cuda::GroupedEpilogue::kSiluMulBf16;
  SCOPED_TRACE(::testing::Message() << (gc.gemm ? "GEMM" : "GEMV") << ", tiles of " << gc.tile_rows << ", n " << gc.n
                                    << ", k " << gc.k << ", group " << gc.group << (silu ? ", SiLU-mul" : ", float32")
                                    << (gc.by_x_row ? ", x_row" : "") << ", k slices " << gc.k_slices
                                    << (gc.dependent ? ", dependent" : "") << (gc.wait_first ? ", wait first" : "")
                                    << ", CTA warps " << gc.cta_warps << (gc.skip_padding ? ", padding skipped" : "")
                                    << (gc.lean ? ", lean" : ""));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int tokens = 29, top_k = 2;
  std::vector<AwqCase> cases;
  std::vector<uint32_t> packed, records;
  for (int e = 0; e < gc.experts; ++e) {
    cases.push_back(MakeAwqCase(gc.n, gc.k, gc.group, gen));
    auto r = cuda::RepackAwqLinear(cases.back().Raw());
    ASSERT_TRUE(r.ok()) << r.status();
    packed.insert(packed.end(), r->packed.begin(), r->packed.end());
    records.insert(records.end(), r->records.begin(), r->records.end());
  }
  // Experts 1 and experts - 1 get no token; expert 0 gets every token (runs of several tiles).
  std::vector<int32_t> ids;
  for (int t = 0; t < tokens; ++t) {
    ids.push_back(0);
    const int other = 2 + t % std::max(1, gc.experts - 3);
    ids.push_back(std::min(other, gc.experts - 2));
  }
  DeviceAlignment aligned;
  ASSERT_NO_FATAL_FAILURE(AlignOnDevice(ids, top_k, gc.experts, gc.tile_rows, &aligned));
  const int64_t slots = aligned.slots;
  const auto slot_of = Download(aligned.slot_of);
  const auto slot_token = Download(aligned.slot_token);
  // x: token rows (through x_row), or one row per slot (row s = slot s; padding slots hold garbage
  // that must not reach an assignment's output).
  const int x_rows = gc.by_x_row ? tokens : static_cast<int>(slots);
  std::vector<uint16_t> x(static_cast<size_t>(x_rows) * gc.k);
  for (auto& v : x) v = FloatToBf16(dist(gen));
  auto d_x = Upload(x);
  auto d_packed = Upload(packed);
  auto d_records = Upload(records);
  auto d_y32 = Zeros<float>(silu ? 1 : slots * gc.n);
  auto d_y16 = Zeros<uint16_t>(silu ? slots * gc.n / 2 : 1);
  const cuda::GroupedAwqGemvParams p{
      .x = reinterpret_cast<const __nv_bfloat16*>(d_x.data()),
      .x_row = gc.by_x_row ? aligned.slot_token.data() : nullptr,
      .slot_token = gc.skip_padding ? aligned.slot_token.data() : nullptr,
      .w = {.packed = d_packed.data(), .records = d_records.data(), .experts = gc.experts, .n = gc.n, .k = gc.k,
            .group_size = gc.group},
      .tile_expert = aligned.tile_expert.data(),
      .num_tiles = aligned.tiles.data(),
      .y = silu ? static_cast<void*>(d_y16.data()) : d_y32.data(),
      .max_tiles = static_cast<int32_t>(slots / gc.tile_rows),
      .tile_rows = gc.tile_rows,
      .epilogue = gc.epilogue,
      .dependent = gc.dependent,
      .wait_first = gc.wait_first,
      .k_slices = gc.k_slices,
      .cta_warps = gc.cta_warps,
      .lean = gc.lean};
  ASSERT_EQ((gc.gemm ? cuda::LaunchGroupedAwqGemm : cuda::LaunchGroupedAwqGemv)(p, nullptr), cudaSuccess);
  const auto y32 = Download(d_y32);
  const auto y16 = Download(d_y16);
  if (gc.skip_padding && !silu) {
    // Padding slots hold garbage rows of x; read as zeros, their outputs are exact zeros.
    int padding = 0;
    for (int64_t slot = 0; slot < slots; ++slot) {
      if (slot_token[slot] >= 0) continue;
      ++padding;
      for (int r = 0; r < gc.n; ++r) ASSERT_EQ(y32[static_cast<size_t>(slot) * gc.n + r], 0.0f) << "slot " << slot;
    }
    ASSERT_GT(padding, 0);
  }
  for (int i = 0; i < tokens * top_k; ++i) {
    const int slot = slot_of[i], e = ids[i];
    const int row = gc.by_x_row ? i / top_k : slot;
    ASSERT_EQ(slot_token[slot], i / top_k);
    const std::vector<float>& w = cases[e].w;
    std::vector<double> y(gc.n), abs_sum(gc.n);
    for (int r = 0; r < gc.n; ++r)
      for (int j = 0; j < gc.k; ++j) {
        const double prod = static_cast<double>(Bf16ToFloat(x[static_cast<size_t>(row) * gc.k + j])) * w[r * gc.k + j];
        y[r] += prod;
        abs_sum[r] += std::fabs(prod);
      }
    if (!silu) {
      // float32 sums of exact products, one scale multiply per 32-k partial
      // (cuda_linear_kernels_test's bound).
      for (int r = 0; r < gc.n; ++r)
        ASSERT_NEAR(y32[static_cast<size_t>(slot) * gc.n + r], y[r],
                    (gc.k + gc.k / 16.0 + 8) * std::ldexp(1.0, -23) * abs_sum[r] + 1e-30)
            << "assignment " << i << " (expert " << e << ") row " << r;
      continue;
    }
    for (int f = 0; f < gc.n / 2; ++f) {
      const double g = y[(f / 8) * 16 + f % 8], u = y[(f / 8) * 16 + f % 8 + 8];
      const double want = g / (1 + std::exp(-g)) * u;
      ASSERT_NEAR(Bf16ToFloat(y16[static_cast<size_t>(slot) * (gc.n / 2) + f]), want, 1e-4 + std::abs(want) / 128)
          << "assignment " << i << " (expert " << e << ") feature " << f;
    }
  }
}

TEST(CudaGroupedAwqGemvTest, EachTileUsesItsExpertsWeights) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  std::mt19937 gen(17);
  for (const bool gemm : {false, true})
    for (int tile_rows : {8, 16, 32, 64}) {
      // n 40: a padded 16-row tile; k 192 in groups of 32 and 64 (an odd group count with 64).
      RunGroupedCase({6, 40, 192, 64, tile_rows, cuda::GroupedEpilogue::kStoreF32, false, gemm}, gen);
      RunGroupedCase({6, 40, 192, 32, tile_rows, cuda::GroupedEpilogue::kStoreF32, true, gemm}, gen);
      RunGroupedCase({6, 48, 256, 128, tile_rows, cuda::GroupedEpilogue::kSiluMulBf16, true, gemm}, gen);
      RunGroupedCase({5, 96, 128, 32, tile_rows, cuda::GroupedEpilogue::kSiluMulBf16, true, gemm}, gen);
    }
  // A long k (more blocks than the pipelines hold) and many row tiles: the
  // 21B's down shape, narrowed; then over several CTAs of the GEMM (n 384).
  RunGroupedCase({4, 256, 1536, 128, 16, cuda::GroupedEpilogue::kStoreF32, false}, gen);
  RunGroupedCase({4, 256, 1536, 128, 16, cuda::GroupedEpilogue::kStoreF32, false, true}, gen);
  RunGroupedCase({4, 384, 1024, 128, 32, cuda::GroupedEpilogue::kSiluMulBf16, true, true}, gen);
  // The GEMV stages an 8-slot tile's rows in shared memory when they fit
  // (kAwqMaxStagedXBytes): the 21B's gate/up k of 2,560 does, k = 3,072 reads x from global memory.
  RunGroupedCase({3, 32, 2560, 128, 8, cuda::GroupedEpilogue::kSiluMulBf16, true}, gen);
  RunGroupedCase({3, 32, 3072, 128, 8, cuda::GroupedEpilogue::kStoreF32, false}, gen);
  // Every k split the GEMV takes when asked (CudaBackendOptions::moe_awq_gemv_k_slices), on
  // the 21B's down shape narrowed (k 1,536: 6 chunks, so 4 and 8 slices leave some warps none)
  // and on a SiLU gate/up.
  for (const int k_slices : {1, 2, 4, 8})
    for (const int tile_rows : {8, 32}) {
      RunGroupedCase({4, 64, 1536, 128, tile_rows, cuda::GroupedEpilogue::kStoreF32, false, false, k_slices}, gen);
      RunGroupedCase({4, 64, 512, 64, tile_rows, cuda::GroupedEpilogue::kSiluMulBf16, true, false, k_slices}, gen);
    }
  // Launched as programmatic dependents (the down launches, GEMV and GEMM), staged and not.
  for (const bool gemm : {false, true}) {
    RunGroupedCase({3, 32, 2560, 128, gemm ? 16 : 8, cuda::GroupedEpilogue::kStoreF32, false, gemm, 0, true}, gen);
    RunGroupedCase({4, 64, 1536, 128, 32, cuda::GroupedEpilogue::kStoreF32, false, gemm, 0, true}, gen);
  }
  RunGroupedCase({3, 32, 2560, 128, 8, cuda::GroupedEpilogue::kSiluMulBf16, true, false, 0, false, true}, gen);
  RunGroupedCase({3, 32, 2560, 128, 32, cuda::GroupedEpilogue::kSiluMulBf16, true, false, 0, false, true}, gen);
  // CTAs of fewer warps (CudaBackendOptions::moe_awq_gemv_cta_warps): more CTAs a tile, the last
  // one's row tiles past n (n 32 is two); the staged gate/up launch (x copied before the weights)
  // and the dependent down launch; with two k slices a CTA.
  for (const int cta_warps : {1, 3, 5, 6, 8}) {
    RunGroupedCase(
        {3, 32, 2560, 128, 8, cuda::GroupedEpilogue::kSiluMulBf16, true, false, 0, false, true, cta_warps}, gen);
    RunGroupedCase({4, 64, 1536, 128, 8, cuda::GroupedEpilogue::kStoreF32, false, false, 0, true, false, cta_warps},
                   gen);
  }
  RunGroupedCase({4, 64, 1536, 128, 8, cuda::GroupedEpilogue::kStoreF32, false, false, 2, false, false, 6}, gen);
  RunGroupedCase({4, 64, 1536, 128, 32, cuda::GroupedEpilogue::kStoreF32, false, false, 2, false, false, 4}, gen);
  // The lean k loop (GroupedAwqGemvParams::lean, the backend's default; tiles of 8 slots, x staged,
  // groups of 128): the gate/up launch waiting for the table and the dependent down launch with padding
  // skipped, at its own k split and at each forced one; groups of 64 ignore it. (The model tests'
  // checkpoints have groups of 64 and 32, so only these cases reach the lean loop.)
  for (const int k_slices : {0, 1, 2, 4}) {
    RunGroupedCase({3, 32, 2560, 128, 8, cuda::GroupedEpilogue::kSiluMulBf16, true, false, k_slices, false, true, 0,
                    false, true},
                   gen);
    RunGroupedCase({4, 64, 1536, 128, 8, cuda::GroupedEpilogue::kStoreF32, false, false, k_slices, true, false, 0,
                    true, true},
                   gen);
  }
  // The backend's one-token launches: lean, whole CTAs of 8 warps; and its 3 - 8 token ones: lean, CTAs
  // of 6 warps (cuda_moe_forward.cc GroupedAwqCtaWarps).
  for (const int cta_warps : {8, 6}) {
    RunGroupedCase({3, 32, 2560, 128, 8, cuda::GroupedEpilogue::kSiluMulBf16, true, false, 0, false, true, cta_warps,
                    false, true},
                   gen);
    RunGroupedCase({4, 64, 1536, 128, 8, cuda::GroupedEpilogue::kStoreF32, false, false, 0, true, false, cta_warps,
                    true, true},
                   gen);
  }
  RunGroupedCase({6, 40, 192, 64, 8, cuda::GroupedEpilogue::kStoreF32, false, false, 0, false, false, 0, false, true},
                 gen);
  // The down launch's padding slots read as zero rows (the alignment's slot_token), staged and not.
  RunGroupedCase({4, 64, 1536, 128, 8, cuda::GroupedEpilogue::kStoreF32, false, false, 0, true, false, 0, true}, gen);
  RunGroupedCase({4, 64, 1536, 128, 16, cuda::GroupedEpilogue::kStoreF32, false, false, 0, true, false, 0, true}, gen);
}

TEST(CudaGroupedAwqGemvTest, SmallStepsTakeCtasThatSpreadEvenly) {
  // Host side only. The 21B-A3B at batch 1 on an H200 (132 SMs, 16 warps an
  // SM at the kernel's registers): 8 tiles (6 routed experts, 2 shared).
  const int sms = 132, tiles = 8;
  auto resident_of = [&](int warps) -> int64_t { return int64_t{sms} * (16 / warps); };
  auto pick = [&](int64_t row_tiles, int k_slices) {
    return cuda::PickGroupedCtaWarps(
        8, k_slices, sms, [&](int w) { return tiles * ((row_tiles + w / k_slices - 1) / (w / k_slices)); },
        resident_of);
  };
  EXPECT_EQ(pick(192, 1), 6);  // gate/up (n 3,072): 256 CTAs, at most 12 warps an SM (8 warps: 16)
  EXPECT_EQ(pick(160, 1), 5);  // down (n 2,560): 256 CTAs, at most 10 (8 warps: 16)
  EXPECT_EQ(pick(192, 2), 8);  // two slices a tile: 384 CTAs of 8 do not fit once, 768 of 4 neither
  EXPECT_EQ(pick(4096, 1), 8);  // a large step: many waves whatever the size
}

TEST(CudaGroupedAwqGemvTest, RejectsBadParameters) {
  // Checked before any CUDA call, so this runs without a device too.
  alignas(16) static uint32_t data[64] = {};
  static int32_t ints[4] = {};
  const cuda::GroupedAwqGemvParams ok{
      .x = reinterpret_cast<const __nv_bfloat16*>(data),
      .w = {.packed = data, .records = data, .experts = 2, .n = 16, .k = 64, .group_size = 32},
      .tile_expert = ints,
      .num_tiles = ints,
      .y = data,
      .max_tiles = 1};
  auto bad = [&](auto edit) {
    cuda::GroupedAwqGemvParams p = ok;
    edit(p);
    return cuda::LaunchGroupedAwqGemv(p, nullptr);
  };
  EXPECT_EQ(bad([](auto& p) { p.w.k = 96; }), cudaErrorInvalidValue);          // not a multiple of 64
  EXPECT_EQ(bad([](auto& p) { p.w.group_size = 48; }), cudaErrorInvalidValue);  // not a power of two
  EXPECT_EQ(bad([](auto& p) { p.w.n = 12; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.w.experts = 0; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.tile_rows = 24; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.max_tiles = 0; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.num_tiles = nullptr; }), cudaErrorInvalidValue);
  // What only the tiled GEMM's dense launches take (LaunchAwqTiledGemm): no tile table, a rows
  // bound, a bf16 store.
  EXPECT_EQ(bad([](auto& p) { p.tile_expert = nullptr; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.rows = 5; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.epilogue = cuda::GroupedEpilogue::kStoreBf16; }), cudaErrorInvalidValue);
  cuda::GroupedAwqGemvParams negative_rows = ok;
  negative_rows.tile_rows = 16;
  negative_rows.rows = -1;
  EXPECT_EQ(cuda::LaunchGroupedAwqGemm(negative_rows, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.cta_warps = 9; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) { p.cta_warps = -1; }), cudaErrorInvalidValue);
  EXPECT_EQ(bad([](auto& p) {
              p.k_slices = 2;
              p.cta_warps = 3;
            }),
            cudaErrorInvalidValue);  // a slice's warps in two CTAs
  cuda::GroupedAwqGemvParams gemm_warps = ok;
  gemm_warps.tile_rows = 16;
  gemm_warps.cta_warps = 4;
  EXPECT_EQ(cuda::LaunchGroupedAwqGemm(gemm_warps, nullptr), cudaErrorInvalidValue);  // its CTAs are its own
  EXPECT_EQ(bad([](auto& p) {
              p.w.n = 24;
              p.epilogue = cuda::GroupedEpilogue::kSiluMulBf16;
            }),
            cudaErrorInvalidValue);  // gate/up pairs need whole 16-row tiles
  EXPECT_EQ(bad([&](auto& p) { p.x = reinterpret_cast<const __nv_bfloat16*>(data) + 1; }), cudaErrorInvalidValue);
  // The tiled GEMM checks the same view and tile sizes.
  cuda::GroupedAwqGemvParams odd_tile = ok;
  odd_tile.tile_rows = 24;
  EXPECT_EQ(cuda::LaunchGroupedAwqGemm(odd_tile, nullptr), cudaErrorInvalidValue);
  cuda::GroupedAwqGemvParams odd_k = ok;
  odd_k.tile_rows = 16;
  odd_k.w.k = 96;
  EXPECT_EQ(cuda::LaunchGroupedAwqGemm(odd_k, nullptr), cudaErrorInvalidValue);
  // Only the GEMV splits k.
  EXPECT_EQ(bad([](auto& p) { p.k_slices = 3; }), cudaErrorInvalidValue);
  cuda::GroupedAwqGemvParams split = ok;
  split.tile_rows = 16;
  split.k_slices = 2;
  EXPECT_EQ(cuda::LaunchGroupedAwqGemm(split, nullptr), cudaErrorInvalidValue);
  cuda::GroupedAwqGemvParams waiting = ok;  // waiting for the tile table: the GEMV's alone
  waiting.tile_rows = 16;
  waiting.wait_first = true;
  EXPECT_EQ(cuda::LaunchGroupedAwqGemm(waiting, nullptr), cudaErrorInvalidValue);
}

// ---- whole models ----

// Hidden 128 and width 64 (the int4 kernels step k by 64), 8 experts top 3,
// two shared experts (one MLP of width 128, split into two pseudo-experts),
// layer 0 dense; head_dim 32, 4 query heads over 2 KV heads; vocab 301.
make_model::DenseShape SmallMoeShape() {
  return {.name = "awq-moe-test",
          .hidden_size = 128,
          .num_hidden_layers = 3,
          .num_attention_heads = 4,
          .num_key_value_heads = 2,
          .head_dim = 32,
          .intermediate_size = 256,
          .vocab_size = 301,
          .max_position_embeddings = 4096,
          .moe = {.num_experts = 8, .top_k = 3, .num_shared_experts = 2, .intermediate_size = 64}};
}

// The same MoE layers under an attention as wide as the 0.3B's (16 query
// heads of 128 over hidden 256): the int4 o_proj splits its k of 2,048 over
// 8 warps and so runs 16 CTAs of 16 rows, enough for one record cluster of
// 16 (MoeRouterRecords::record_cluster), which the narrow shape's 8 CTAs
// never reach.
make_model::DenseShape WideAttentionMoeShape() {
  make_model::DenseShape s = SmallMoeShape();
  s.name = "awq-moe-wide-attention-test";
  s.hidden_size = 256;
  s.num_hidden_layers = 2;
  s.num_attention_heads = 16;
  s.head_dim = 128;
  return s;
}

class CudaAwqMoeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("cuda_awq_moe");
    const absl::Status written = WriteFloatCheckpoint(SmallMoeShape(), *dir_ / "float");
    ASSERT_TRUE(written.ok()) << written;
    for (const int64_t group : {64, 32}) {
      const absl::Status q = QuantizeRtn(*dir_ / "float", *dir_ / absl::StrCat("awq", group), group);
      ASSERT_TRUE(q.ok()) << q;
    }
    const absl::Status wide = WriteFloatCheckpoint(WideAttentionMoeShape(), *dir_ / "wide_float");
    ASSERT_TRUE(wide.ok()) << wide;
    const absl::Status q = QuantizeRtn(*dir_ / "wide_float", *dir_ / "wide_awq64", 64);
    ASSERT_TRUE(q.ok()) << q;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string Dir(const std::string& name) { return *dir_ / name; }
  static ScratchDir* dir_;
};
ScratchDir* CudaAwqMoeTest::dir_ = nullptr;

// Runs everywhere (no device needed): the fixture is what the GPU tests think it is.
TEST_F(CudaAwqMoeTest, TheQuantizedCheckpointIsAnAwqMoeModel) {
  auto m = LoadModel(Dir("awq64"));
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE((*m)->config.awq.has_value());
  EXPECT_EQ((*m)->config.awq->group_size, 64);
  const Ernie45LayerWeights& l = (*m)->weights.layers[1];
  ASSERT_TRUE(l.is_moe);
  ASSERT_EQ(l.moe.experts.size(), 8u);
  EXPECT_TRUE(l.moe.experts[7].down_proj.is_awq());
  ASSERT_TRUE(l.moe.has_shared);
  EXPECT_TRUE(l.moe.shared.gate_proj.is_awq());
  EXPECT_EQ(l.moe.shared.gate_proj.out_features(), 128);
  EXPECT_FALSE((*m)->weights.layers[0].is_moe);
  // The CPU reference runs it (the GPU tests' expected values).
  auto cpu = cpu::CpuBackend::Create(**m, {.num_threads = 2, .block_size = 16, .num_blocks = 2, .max_tokens_per_step = 8});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const std::vector<int32_t> tokens = {1, 17, 250, 3, 99};
  const auto logits = TeacherForced(**cpu, tokens, 0, 5, ConsecutiveBlocks(5, 16));
  for (float v : logits) ASSERT_TRUE(std::isfinite(v));
  EXPECT_GT(*std::max_element(logits.begin(), logits.end()), *std::min_element(logits.begin(), logits.end()));
}

// Per-position relative L2 error bounds of the logits (cuda_backend_parity_test's
// kBound for the median and 90th percentile; a routing flip moves one
// position far, so the maximum is only held under 1).
constexpr double kBound = 0.027;

TEST_F(CudaAwqMoeTest, TeacherForcedLogitsMatchTheCpuReferenceOnEveryExpertPath) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  for (const char* name : {"awq64", "awq32"}) {
    auto m = LoadModel(Dir(name));
    ASSERT_TRUE(m.ok()) << m.status();
    auto cpu = cpu::CpuBackend::Create(**m, {.num_threads = 2, .block_size = 16, .num_blocks = 16,
                                             .max_tokens_per_step = 128});
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    const int64_t vocab = (*cpu)->vocab_size();
    std::vector<int32_t> tokens(96);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(3 + (i * 7919 + 13) % (vocab - 3));
    const auto table = ConsecutiveBlocks(static_cast<int64_t>(tokens.size()), 16);
    const auto ref = TeacherForced(**cpu, tokens, 0, 128, table);
    struct Layout {
      int32_t chunk;
      int64_t moe_chunk_tokens, moe_max_tile_rows;
      int32_t moe_grouped_gemm_min_rows = 0;
    };
    // One step of 96 (grouped kernels, tiles up to 32: the GEMM for tiles
    // of 16+, or the GEMV at every size); chunks of 7 and decode steps of 1
    // (graphs; tiles of 8, also through the GEMM); MoE passes of 5 tokens;
    // tiles of 64.
    for (const Layout layout : {Layout{96, 1024, 32}, Layout{96, 1024, 32, -1}, Layout{7, 1024, 32},
                                Layout{7, 1024, 32, 8}, Layout{1, 1024, 32}, Layout{33, 5, 32}, Layout{96, 1024, 64}}) {
      SCOPED_TRACE(absl::StrCat(name, " chunk=", layout.chunk, " moe_chunk=", layout.moe_chunk_tokens,
                                " max_tile=", layout.moe_max_tile_rows,
                                " grouped_gemm_min_rows=", layout.moe_grouped_gemm_min_rows));
      auto gpu = CreateCudaBackend(**m, {.block_size = 16,
                                         .num_blocks = 16,
                                         .max_tokens_per_step = 128,
                                         .moe_chunk_tokens = layout.moe_chunk_tokens,
                                         .moe_max_tile_rows = static_cast<int32_t>(layout.moe_max_tile_rows),
                                         .moe_grouped_gemm_min_rows = layout.moe_grouped_gemm_min_rows});
      ASSERT_TRUE(gpu.ok()) << gpu.status();
      const auto got = TeacherForced(**gpu, tokens, 0, layout.chunk, table);
      std::vector<double> errors;
      for (size_t t = 0; t < tokens.size(); ++t)
        errors.push_back(RelativeL2(got.data() + t * vocab, ref.data() + t * vocab, vocab));
      std::sort(errors.begin(), errors.end());
      EXPECT_LE(errors[errors.size() / 2], kBound) << "median";
      EXPECT_LE(errors[(errors.size() - 1) * 9 / 10], kBound) << "90th percentile";
      EXPECT_LE(errors.back(), 1.0) << "maximum";
      std::cout << "[ yardstick ] " << name << " chunk " << layout.chunk << " max_tile " << layout.moe_max_tile_rows
                << ": median " << errors[errors.size() / 2] << ", max " << errors.back() << "\n";
    }
  }
}

// The fixture's 24-token prompt teacher-forced in decode steps of one token
// (graphs), on a backend with `options`' MoE settings; empty on a failure.
std::vector<float> OneTokenStepLogits(const LoadedModel& m, CudaBackendOptions options) {
  std::vector<int32_t> tokens(24);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(3 + (i * 7919 + 13) % 290);
  options.block_size = 16;
  options.num_blocks = 16;
  options.max_tokens_per_step = 128;
  auto gpu = CreateCudaBackend(m, options);
  EXPECT_TRUE(gpu.ok()) << gpu.status();
  if (!gpu.ok()) return {};
  return TeacherForced(**gpu, tokens, 0, 1, ConsecutiveBlocks(static_cast<int64_t>(tokens.size()), 16));
}

// The largest per-position relative L2 between two OneTokenStepLogits runs.
double WorstPositionError(const std::vector<float>& got, const std::vector<float>& want) {
  constexpr size_t kPositions = 24;
  const int64_t vocab = static_cast<int64_t>(want.size() / kPositions);
  double worst = 0.0;
  for (size_t t = 0; t < kPositions; ++t)
    worst = std::max(worst, RelativeL2(got.data() + t * vocab, want.data() + t * vocab, vocab));
  return worst;
}

// The shared experts' CTAs of a one-token step's gate/up GEMV while the
// routing runs (CudaBackendOptions::moe_early_shared_experts): asking the L2
// for their weights (1) changes no logit; computing their tiles from the
// residual they normalise themselves (2, without waiting for the routing)
// gives the logits of waiting to bf16 rounding (the same RMSNorm
// expression, its sum of squares added in another order), decode step after
// decode step on graphs, on both group sizes; their down tiles started by
// the gate/up CTAs' count (3) give mode 2's logits bit for bit (same
// arithmetic, other synchronisation). A mode that read the routing's
// outputs, an unwritten residual or unwritten gate/up rows early would be
// far off; one whose count never came would fall back to waiting, slowly.
TEST_F(CudaAwqMoeTest, SharedExpertsDuringTheRoutingChangeNoLogit) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  for (const char* name : {"awq64", "awq32"}) {
    auto m = LoadModel(Dir(name));
    ASSERT_TRUE(m.ok()) << m.status();
    std::vector<std::vector<float>> logits;
    for (const int mode : {0, 1, 2, 3}) {
      logits.push_back(OneTokenStepLogits(**m, {.moe_early_shared_experts = mode}));
      ASSERT_FALSE(logits.back().empty());
      ASSERT_EQ(logits.back().size(), logits[0].size());
    }
    for (size_t i = 0; i < logits[0].size(); ++i) {
      ASSERT_EQ(logits[1][i], logits[0][i]) << name << " mode 1, logit " << i;
      ASSERT_EQ(logits[3][i], logits[2][i]) << name << " mode 3, logit " << i;
    }
    const double worst = WorstPositionError(logits[2], logits[0]);
    EXPECT_LE(worst, 0.01) << name << " mode 2";
    std::cout << "[ yardstick ] " << name << " shared experts during the routing: max relative L2 " << worst << "\n";
  }
}

// One-token steps with the routing folded into the o_proj and the experts'
// launches (CudaBackendOptions::moe_fold_routing: router records, each
// launch choosing for itself) against the routing launch, decode step after
// decode step on graphs, on both group sizes (the folded GEMV's two loops):
// the same choices give the same logits to float rounding (the dots and the
// sum of squares are added in another order, so the weights and the normed
// row's inv_rms move by an ulp or so). A reader that chose another expert
// than its neighbours, read a tile of another expert, or read the records
// or the residual before the o_proj finished would be far off (a flipped
// bf16 of the normed row alone moves a position ~1e-3). The folded path
// must have run: its sums are not the routing launch's bit for bit.
TEST_F(CudaAwqMoeTest, FoldedOneTokenRoutingGivesTheRoutingLaunchsLogits) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  for (const char* name : {"awq64", "awq32"}) {
    auto m = LoadModel(Dir(name));
    ASSERT_TRUE(m.ok()) << m.status();
    const std::vector<float> launched = OneTokenStepLogits(**m, {.moe_fold_routing = false});
    const std::vector<float> folded = OneTokenStepLogits(**m, {.moe_fold_routing = true});
    ASSERT_FALSE(launched.empty());
    ASSERT_EQ(folded.size(), launched.size());
    EXPECT_NE(folded, launched) << name << ": the folded routing did not run";
    const double worst = WorstPositionError(folded, launched);
    EXPECT_LE(worst, 1e-4) << name;  // run3 of NOTES.md v42: 2.9e-7 and 1.8e-7
    std::cout << "[ yardstick ] " << name << " folded routing: max relative L2 " << worst << "\n";
  }
}

// The folded routing's launch options: the shared experts' gate/up CTAs
// and the down CTAs asking the L2 for their weights before they wait
// (moe_fold_prefetch_shared, moe_fold_prefetch_down), and the q|k|v launch
// asking the L2 for the attention's earlier keys (kv_prefetch_max_seqs),
// change no logit;
// other o_proj clusters (moe_router_record_cluster: more, smaller records
// or fewer, larger ones, summed in another order) give the
// routing launch's logits to float rounding, as the default clusters (16
// on Hopper) do (the wide-attention model's o_proj runs one cluster of 16).
TEST_F(CudaAwqMoeTest, FoldedRoutingsLaunchOptionsGiveItsLogits) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  for (const char* name : {"awq64", "awq32", "wide_awq64"}) {
    auto m = LoadModel(Dir(name));
    ASSERT_TRUE(m.ok()) << m.status();
    const std::vector<float> launched = OneTokenStepLogits(**m, {.moe_fold_routing = false});
    const std::vector<float> folded =
        OneTokenStepLogits(**m, {.moe_fold_routing = true, .moe_fold_prefetch_shared = false});
    ASSERT_FALSE(folded.empty());
    for (const int kv_prefetch : {0, 8}) {
      const std::vector<float> prefetched = OneTokenStepLogits(**m, {.moe_fold_routing = true,
                                                                     .moe_fold_prefetch_shared = true,
                                                                     .moe_fold_prefetch_down = true,
                                                                     .kv_prefetch_max_seqs = kv_prefetch});
      ASSERT_EQ(prefetched.size(), folded.size());
      for (size_t i = 0; i < folded.size(); ++i)
        ASSERT_EQ(prefetched[i], folded[i]) << name << ", key prefetch " << kv_prefetch << ", logit " << i;
    }
    EXPECT_LE(WorstPositionError(folded, launched), 1e-4) << name;
    for (const int cluster : {1, 2, 4, 8, 16}) {
      const std::vector<float> clustered =
          OneTokenStepLogits(**m, {.moe_fold_routing = true, .moe_router_record_cluster = cluster});
      ASSERT_EQ(clustered.size(), launched.size());
      EXPECT_LE(WorstPositionError(clustered, launched), 1e-4) << name << ", clusters of " << cluster;
    }
  }
}

TEST_F(CudaAwqMoeTest, DummyWeightsHaveTheCheckpointsShapesAndAreDeterministic) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  const auto backends =
      MakeDummyAndCheckpointBackends(Dir("awq64"), {.block_size = 16, .num_blocks = 8, .max_tokens_per_step = 64});
  ASSERT_TRUE(backends.ok());
  // Same int4 arrays, records, router, norms and bf16 embeddings, byte for byte in size.
  EXPECT_EQ(backends.a->memory().weights, backends.from_checkpoint->memory().weights);
  EXPECT_EQ(backends.a->memory().workspace, backends.from_checkpoint->memory().workspace);
  const std::vector<int32_t> tokens = {1, 5, 9, 200, 3, 77, 42, 11, 300, 8, 64, 2, 19, 7, 150, 33, 4, 99};
  const auto table = ConsecutiveBlocks(static_cast<int64_t>(tokens.size()), 16);
  // 18 tokens: the grouped kernel in one step; then one token at a time (graphs).
  for (const int32_t chunk : {18, 1}) {
    const auto la = TeacherForced(*backends.a, tokens, 0, chunk, table);
    const auto lb = TeacherForced(*backends.b, tokens, 0, chunk, table);
    ASSERT_EQ(la, lb);
    for (float v : la) ASSERT_TRUE(std::isfinite(v));
    EXPECT_GT(*std::max_element(la.begin(), la.end()), *std::min_element(la.begin(), la.end()));
  }
}

TEST_F(CudaAwqMoeTest, RefusesWidthsTheInt4KernelsCannotTake) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  // moe_e16_k4_shared1: hidden 64, experts of width 32 (the down projection's k).
  const std::string out = Dir("narrow_awq32");
  const absl::Status q = QuantizeRtn(TestDataDir() + "/moe_reference/moe_e16_k4_shared1_bf16", out, 32);
  ASSERT_TRUE(q.ok()) << q;
  auto m = LoadModel(out);
  ASSERT_TRUE(m.ok()) << m.status();
  auto gpu = CreateCudaBackend(**m, {.block_size = 16, .num_blocks = 8, .max_tokens_per_step = 16});
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(gpu.status().message().find("moe_intermediate_size divisible by 64; the model has 64 and 32"),
            std::string::npos)
      << gpu.status();
}

}  // namespace
}  // namespace ernie::testing
