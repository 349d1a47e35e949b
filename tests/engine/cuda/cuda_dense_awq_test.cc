// A dense AWQ checkpoint on the CUDA backend against the CPU's int4
// reference: a random bf16 checkpoint written here (ernie-make-model's
// library; hidden 128, intermediate 256, 4 query heads over 2 KV heads of
// 32, with and without biases), quantized here (ernie-quantize's library,
// RTN, groups 64 and 32), teacher-forced through every linear path:
// the fused int4 decode kernels (steps of 1 as CUDA graphs, and of 7), the
// unfused int4 GEMV (fused decode off; steps of 16), the tiled int4 GEMM
// (steps of 33, a partial last tile, in tiles of 16 and 64; one step of 96)
// and dequantise + cuBLAS (one step of 96).
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/backend/cuda/kernels/decode_linear.h"
#include "tests/engine/cuda/backend_runner.h"
#include "tests/engine/cuda/quantized_checkpoints.h"

namespace ernie::testing {
namespace {

make_model::DenseShape SmallDenseShape(bool use_bias) {
  return {.name = use_bias ? "awq-dense-bias-test" : "awq-dense-test",
          .hidden_size = 128,
          .num_hidden_layers = 3,
          .num_attention_heads = 4,
          .num_key_value_heads = 2,
          .head_dim = 32,
          .intermediate_size = 256,
          .vocab_size = 301,
          .max_position_embeddings = 4096,
          .use_bias = use_bias};
}

class CudaDenseAwqTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("cuda_awq_dense");
    for (const bool bias : {false, true}) {
      const std::string name = bias ? "float_bias" : "float";
      const absl::Status written = WriteFloatCheckpoint(SmallDenseShape(bias), *dir_ / name);
      ASSERT_TRUE(written.ok()) << written;
    }
    for (const auto& [in, out, group] : {std::tuple{"float", "awq64", 64}, std::tuple{"float", "awq32", 32},
                                         std::tuple{"float_bias", "awq64_bias", 64}}) {
      const absl::Status q = QuantizeRtn(*dir_ / in, *dir_ / out, group);
      ASSERT_TRUE(q.ok()) << q;
    }
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string Dir(const std::string& name) { return *dir_ / name; }
  static ScratchDir* dir_;
};
ScratchDir* CudaDenseAwqTest::dir_ = nullptr;

// cuda_backend_parity_test's bound on the per-position relative L2 error.
constexpr double kBound = 0.027;

TEST_F(CudaDenseAwqTest, TeacherForcedLogitsMatchTheCpuReferenceOnEveryLinearPath) {
  ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
  for (const char* name : {"awq64", "awq32", "awq64_bias"}) {
    auto m = LoadModel(Dir(name));
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_TRUE((*m)->config.awq.has_value()) << name;
    auto cpu = cpu::CpuBackend::Create(
        **m, {.num_threads = 2, .block_size = 16, .num_blocks = 16, .max_tokens_per_step = 128});
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    const int64_t vocab = (*cpu)->vocab_size();
    std::vector<int32_t> tokens(96);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(3 + (i * 7919 + 13) % (vocab - 3));
    const auto table = ConsecutiveBlocks(static_cast<int64_t>(tokens.size()), 16);
    const auto ref = TeacherForced(**cpu, tokens, 0, 128, table);
    struct Layout {
      int32_t chunk;
      bool fused_decode;
      int32_t tiled_max_rows = 0;  // CudaBackendOptions::awq_tiled_gemm_max_rows
      int32_t tile_rows = 64;
      int32_t small_batch_min = 17, small_batch_max = 0;  // awq_small_batch_gemm_min_rows / _max_rows
    };
    // The last three: the int4 small-batch GEMM at 7 rows (every step; no
    // fused kernels), 33 and 96 (with the split norms and the SiLU / rotary
    // epilogues; 96 rows is one block of 128 x rows).
    for (const Layout layout : {Layout{1, true}, Layout{7, true}, Layout{1, false}, Layout{16, true},
                                Layout{96, true}, Layout{33, true, 128, 16}, Layout{33, true, 128, 64},
                                Layout{96, true, 128, 32}, Layout{7, false, 0, 64, 1, 64},
                                Layout{33, true, 0, 64, 17, 64}, Layout{96, true, 0, 64, 17, 128}}) {
      SCOPED_TRACE(absl::StrCat(name, " chunk=", layout.chunk, " fused_decode=", layout.fused_decode,
                                " tiled_max_rows=", layout.tiled_max_rows, " tile_rows=", layout.tile_rows,
                                " small_batch=", layout.small_batch_min, "-", layout.small_batch_max));
      auto gpu = CreateCudaBackend(
          **m, {.block_size = 16,
                .num_blocks = 16,
                .max_tokens_per_step = 128,
                // chunk 7: the fused int4 kernels too
                .fused_decode_max_rows = layout.fused_decode ? cuda::kDecodeLinearMaxRows : 0,
                .awq_tiled_gemm_max_rows = layout.tiled_max_rows,
                .awq_tiled_gemm_tile_rows = layout.tile_rows,
                .awq_small_batch_gemm_max_rows = layout.small_batch_max,
                .awq_small_batch_gemm_min_rows = layout.small_batch_min});
      ASSERT_TRUE(gpu.ok()) << gpu.status();
      const auto got = TeacherForced(**gpu, tokens, 0, layout.chunk, table);
      std::vector<double> errors;
      for (size_t t = 0; t < tokens.size(); ++t)
        errors.push_back(RelativeL2(got.data() + t * vocab, ref.data() + t * vocab, vocab));
      std::sort(errors.begin(), errors.end());
      EXPECT_LE(errors[errors.size() / 2], kBound) << "median";
      EXPECT_LE(errors.back(), kBound) << "maximum";
      std::cout << "[ yardstick ] " << name << " chunk " << layout.chunk << " fused " << layout.fused_decode
                << " tiled " << layout.tiled_max_rows << "/" << layout.tile_rows << " small-batch "
                << layout.small_batch_min << "-" << layout.small_batch_max << ": median " << errors[errors.size() / 2] << ", max " << errors.back() << "\n";
    }
  }
}

}  // namespace
}  // namespace ernie::testing
