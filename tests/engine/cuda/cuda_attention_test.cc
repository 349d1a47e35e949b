// The two paged attention kernels against a float64 attention computed here,
// on random queries and a random paged cache, through the backend's own step
// planner (StepInputs): decode steps (single-token items: the tensor-core
// decode kernel with the queries as the mma's 8-wide side, and the general
// kernel's key-split shape), prefill chunks over cached prefixes and mixed
// steps (its row shape; with swap-AB on, one-token items of such steps take
// the swap-AB body in the same launch), each without and with split-KV, for every head dim
// the tensor-core kernel takes and GQA groups of 1, 3, 5 and 8. Contexts cross
// tile (64), block and split boundaries; block tables are scattered.
//
// Bounds, per query row, relative L2 against float64:
// - CUDA-core kernel (float32 q and probabilities): 5e-3, the bf16 output's
//   rounding;
// - tensor-core kernel (q and probabilities rounded to bf16, as bf16
//   attention does): 1.5e-2.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/kernels/mma_attention.h"
#include "engine/backend/cuda/kernels/paged_attention.h"
#include "engine/backend/cuda/step_plan.h"
#include "engine/util/half.h"
#include "tests/engine/cuda/backend_runner.h"
#include "tests/engine/cuda/device_copies.h"

namespace ernie::testing {
namespace {

using cuda::DeviceBuffer;

constexpr int kBlockSize = 16;
constexpr int kNumBlocks = 544;  // room for LoneDecodeBeyondTheStagedBlockTable's 520 blocks

struct Shape {
  int head_dim;
  int num_heads;
  int num_kv_heads;
};

// One sequence of a step: `cached` tokens already in the cache, `fresh` new ones.
struct Seq {
  int cached;
  int fresh;
};

class AttentionKernelTest : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override {
    ERNIE_SKIP_WITHOUT_CUDA_DEVICE();
    const Shape s = GetParam();
    ASSERT_TRUE(cuda::MmaAttentionSupportsHeadDim(s.head_dim));
    std::mt19937 rng(1234 + s.head_dim * 7 + s.num_heads);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    const size_t plane = size_t{kNumBlocks} * s.num_kv_heads * kBlockSize * s.head_dim;
    k_host_.resize(plane);
    v_host_.resize(plane);
    // Keys scaled so that softmaxes are neither flat nor one-hot.
    for (size_t i = 0; i < plane; ++i) {
      k_host_[i] = RoundToBf16(normal(rng) * 1.5f);
      v_host_[i] = RoundToBf16(normal(rng));
    }
    std::vector<uint16_t> k_bits(plane), v_bits(plane);
    for (size_t i = 0; i < plane; ++i) {
      k_bits[i] = FloatToBf16(k_host_[i]);
      v_bits[i] = FloatToBf16(v_host_[i]);
    }
    k_ = Upload(k_bits);
    v_ = Upload(v_bits);
    // Every block id once, shuffled: sequences take consecutive runs of it.
    block_order_.resize(kNumBlocks);
    std::iota(block_order_.begin(), block_order_.end(), 0);
    std::shuffle(block_order_.begin(), block_order_.end(), rng);
    rng_ = rng;
  }

  static float RoundToBf16(float f) { return Bf16ToFloat(FloatToBf16(f)); }

  int64_t KvIndex(int block, int head, int row, int d) const {
    const Shape s = GetParam();
    return ((int64_t{block} * s.num_kv_heads + head) * kBlockSize + row) * s.head_dim + d;
  }

  // Runs one step of `seqs` through `kernel` ("mma" or "simt") with up to
  // `max_splits` splits; checks every query row against float64.
  void CheckStep(const std::vector<Seq>& seqs, bool mma, int splits, bool swap_ab = true, bool wide = false) {
    const Shape s = GetParam();
    const int group = s.num_heads / s.num_kv_heads;
    const int q_width = (s.num_heads + 2 * s.num_kv_heads) * s.head_dim;  // the fused qkv row
    std::vector<int32_t> tokens, positions;
    std::vector<std::vector<int32_t>> tables;
    std::vector<SequenceSlice> slices;
    size_t next_block = 0;
    for (const Seq& q : seqs) {
      const int context = q.cached + q.fresh;
      const int blocks = (context + kBlockSize - 1) / kBlockSize;
      ASSERT_LE(next_block + static_cast<size_t>(blocks), block_order_.size()) << "test too large for the cache";
      tables.emplace_back(block_order_.begin() + static_cast<std::ptrdiff_t>(next_block),
                          block_order_.begin() + static_cast<std::ptrdiff_t>(next_block + blocks));
      next_block += static_cast<size_t>(blocks);
      for (int j = 0; j < q.fresh; ++j) {
        tokens.push_back(7);
        positions.push_back(q.cached + j);
      }
    }
    int first = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      slices.push_back({first, seqs[i].fresh, seqs[i].cached, tables[i]});
      first += seqs[i].fresh;
    }
    const auto num_tokens = static_cast<int>(tokens.size());
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> q_host(static_cast<size_t>(num_tokens) * q_width);
    for (float& f : q_host) f = normal(rng_);

    auto inputs = cuda::StepInputs::Create(num_tokens, 4 * kNumBlocks);
    ASSERT_TRUE(inputs.ok()) << inputs.status();
    const int rows_per_item = mma ? cuda::kMmaAttentionRows : cuda::kAttentionRowsPerCta;
    const StepBatch batch{tokens, positions, slices, {}};
    ASSERT_TRUE(inputs->Upload(batch, kBlockSize, group, rows_per_item, nullptr).ok());
    auto q = Upload(q_host);
    auto out = Zeros<uint16_t>(static_cast<size_t>(num_tokens) * s.num_heads * s.head_dim);
    const int64_t partial_rows = cuda::PagedAttentionPartialCtas(132) * rows_per_item;
    auto partial_out = Zeros<float>(static_cast<size_t>(partial_rows * s.head_dim));
    auto partial_ml = Zeros<float>(static_cast<size_t>(partial_rows * 2));
    const cuda::PagedAttentionParams p{
        .q = q.data(),
        .q_row_stride = q_width,
        .cache = {.k = reinterpret_cast<__nv_bfloat16*>(k_.data()),
                  .v = reinterpret_cast<__nv_bfloat16*>(v_.data()),
                  .num_blocks = kNumBlocks,
                  .num_kv_heads = s.num_kv_heads,
                  .block_size = kBlockSize,
                  .head_dim = s.head_dim},
        .items = inputs->items(),
        .block_tables = inputs->block_tables(),
        .positions = inputs->positions(),
        .out = reinterpret_cast<__nv_bfloat16*>(out.data()),
        .scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim)),
        .num_items = inputs->num_items(),
        .num_heads = s.num_heads,
        .num_kv_heads = s.num_kv_heads,
        .head_dim = s.head_dim,
        // As many as the partial buffers hold (at least 1: one split needs none).
        .num_splits = std::max(1, std::min(splits, static_cast<int>(cuda::PagedAttentionPartialCtas(132) /
                                                                    inputs->num_items() / s.num_kv_heads))),
        .partial_out = partial_out.data(),
        .partial_ml = partial_ml.data(),
        .decode_swap_ab = swap_ab,
        .wide_decode = wide};
    ASSERT_GE(p.num_splits, 1);
    const cuda::AttentionItems items = cuda::AttentionItemsOf(inputs->num_items(), inputs->num_single_token_items());
    ASSERT_EQ(items == cuda::AttentionItems::kSingleToken, inputs->num_items() == num_tokens);
    ASSERT_EQ(mma ? cuda::LaunchMmaAttention(p, items, nullptr) : cuda::LaunchPagedAttention(p, nullptr),
              cudaSuccess);
    const std::vector<uint16_t> got = Download(out);

    const double bound = mma ? 1.5e-2 : 5e-3;
    double worst = 0.0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      for (int j = 0; j < seqs[i].fresh; ++j) {
        const int t = slices[i].first_token + j, pos = seqs[i].cached + j;
        for (int h = 0; h < s.num_heads; ++h) {
          const int kv = h / group;
          const float* qr = q_host.data() + static_cast<size_t>(t) * q_width + static_cast<size_t>(h) * s.head_dim;
          std::vector<double> score(static_cast<size_t>(pos) + 1), want(static_cast<size_t>(s.head_dim), 0.0);
          double max_score = -INFINITY, sum = 0.0;
          for (int key = 0; key <= pos; ++key) {
            const int block = tables[i][static_cast<size_t>(key / kBlockSize)];
            double dot = 0.0;
            for (int d = 0; d < s.head_dim; ++d) dot += double{qr[d]} * k_host_[KvIndex(block, kv, key % kBlockSize, d)];
            score[static_cast<size_t>(key)] = dot / std::sqrt(double(s.head_dim));
            max_score = std::max(max_score, score[static_cast<size_t>(key)]);
          }
          for (int key = 0; key <= pos; ++key) {
            const double w = std::exp(score[static_cast<size_t>(key)] - max_score);
            sum += w;
            const int block = tables[i][static_cast<size_t>(key / kBlockSize)];
            for (int d = 0; d < s.head_dim; ++d)
              want[static_cast<size_t>(d)] += w * v_host_[KvIndex(block, kv, key % kBlockSize, d)];
          }
          double err = 0.0, norm = 0.0;
          for (int d = 0; d < s.head_dim; ++d) {
            const double w = want[static_cast<size_t>(d)] / sum;
            const double g = Bf16ToFloat(got[(static_cast<size_t>(t) * s.num_heads + h) * s.head_dim + d]);
            ASSERT_TRUE(std::isfinite(g)) << "token " << t << " head " << h << " dim " << d;
            err += (g - w) * (g - w);
            norm += w * w;
          }
          const double rel = std::sqrt(err / std::max(norm, 1e-30));
          worst = std::max(worst, rel);
          ASSERT_LE(rel, bound) << (mma ? "mma" : "simt") << (swap_ab ? "" : " (no swap-AB)") << (wide ? " (wide)" : "")
                                << " token " << t
                                << " (position " << pos << ") head " << h << ", " << p.num_splits << " splits";
        }
      }
    }
    std::printf("[ attention ] %s D=%d heads %d/%d, %zu sequences, %d tokens, %d items, %d splits: worst row %.2e\n",
                mma ? (wide ? "mmaw" : swap_ab ? "mma " : "mma-") : "simt", s.head_dim, s.num_heads, s.num_kv_heads, seqs.size(), num_tokens,
                p.num_items, p.num_splits, worst);
  }

  // The tensor-core kernel (decode steps of groups up to 8 on its swap-AB
  // kernel, unsplit also on the wide one, and again on the general kernel's
  // decode shape) and the CUDA-core one. The wide flag is ignored by
  // multi-token steps and split launches: those runs check it changes nothing.
  void CheckBothKernels(const std::vector<Seq>& seqs) {
    struct Kernel {
      bool mma, swap_ab, wide;
    };
    for (const Kernel k : {Kernel{true, true, false}, Kernel{true, true, true}, Kernel{true, false, false},
                           Kernel{false, false, false}})
      for (const int splits : {1, 5, 32}) {
        if (k.wide && splits == 32) continue;  // the same launches as at 5
        SCOPED_TRACE(::testing::Message() << (k.mma ? "mma" : "simt") << (k.swap_ab ? " (swap-AB decode)" : "")
                                          << (k.wide ? " (wide decode)" : "") << ", up to " << splits << " splits");
        CheckStep(seqs, k.mma, splits, k.swap_ab, k.wide);
        if (::testing::Test::HasFatalFailure()) return;
      }
  }

  std::vector<float> k_host_, v_host_;
  DeviceBuffer<uint16_t> k_, v_;
  std::vector<int32_t> block_order_;
  std::mt19937 rng_;
};

TEST_P(AttentionKernelTest, DecodeStep) {
  // Contexts across the 64-key tile, the 16-row block, the wide kernel's
  // 256-key round and short ones.
  CheckBothKernels({{0, 1}, {16, 1}, {63, 1}, {64, 1}, {100, 1}, {200, 1}, {255, 1}, {256, 1}, {320, 1}});
}

TEST_P(AttentionKernelTest, ManyShortDecodes) {
  // 300 one-token items: grids of more CTAs than the device holds at once,
  // so the tensor-core kernel takes fewer pipeline stages (on the H200 at
  // head_dim 128: two, against four for the steps above).
  std::vector<Seq> seqs;
  for (int i = 0; i < 300; ++i) seqs.push_back({i % 16, 1});
  CheckBothKernels(seqs);
}

TEST_P(AttentionKernelTest, LoneDecodeWithALongContext) {
  // One item: the split-KV case of a single stream.
  CheckBothKernels({{700, 1}});
}

TEST_P(AttentionKernelTest, LoneDecodeBeyondTheStagedBlockTable) {
  // Unsplit, 520 blocks of keys: more than the tensor-core kernel copies to
  // shared memory (512), so it reads the table as it goes; split, it copies.
  CheckBothKernels({{8300, 1}});
}

TEST_P(AttentionKernelTest, PrefillChunksOverCachedPrefixes) {
  CheckBothKernels({{0, 70}, {40, 13}, {129, 64}});
}

TEST_P(AttentionKernelTest, MixedStep) {
  // Decodes beside prefill chunks: the row shape takes one-token items too
  // (without swap-AB), or the mixed kernel gives them the swap-AB body.
  CheckBothKernels({{90, 1}, {0, 33}, {5, 1}, {64, 65}, {250, 1}});
}

TEST_P(AttentionKernelTest, ManyDecodesBesideAPrompt) {
  // A serving step while a request arrives: many decodes (contexts across
  // tile and block boundaries), one whole prompt, and a chunk over a cached
  // prefix whose last item holds one token.
  std::vector<Seq> seqs;
  for (int i = 0; i < 100; ++i) seqs.push_back({(i * 37) % 60, 1});
  seqs.push_back({0, 128});
  seqs.push_back({64, 129});
  CheckBothKernels(seqs);
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionKernelTest,
                         ::testing::Values(Shape{128, 16, 2},  // the 0.3b shape: groups of 8
                                           Shape{128, 20, 4},  // the 21B-A3B shape: groups of 5
                                           Shape{64, 6, 2},    // groups of 3
                                           Shape{32, 4, 4},    // no grouping
                                           Shape{16, 8, 1}),   // one KV head for 8 query heads
                         [](const ::testing::TestParamInfo<Shape>& info) {
                           return absl::StrCat("D", info.param.head_dim, "_H", info.param.num_heads, "_KV",
                                               info.param.num_kv_heads);
                         });

}  // namespace
}  // namespace ernie::testing
