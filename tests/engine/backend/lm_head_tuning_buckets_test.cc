// The lm_head tuning's bucket row counts (engine/backend/cuda/gemm_tuning.h):
// which rows are timed at start decides which logit passes take a tuned
// algorithm, so the list must hold the common batch sizes and stay inside
// the rows the cuBLAS lm_head sees.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "engine/backend/cuda/gemm_tuning.h"

namespace ernie {
namespace {

using Buckets = std::vector<int64_t>;

TEST(LmHeadTuningBucketsTest, PowersOfTwoThenAboutOneAndAHalfApart) {
  EXPECT_EQ(LmHeadTuningBuckets(0, 256), (Buckets{1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256}));
  EXPECT_EQ(LmHeadTuningBuckets(0, 1024), (Buckets{1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768,
                                                   1024}));
}

TEST(LmHeadTuningBucketsTest, StartsPastTheSmallBatchLmHead) {
  EXPECT_EQ(LmHeadTuningBuckets(32, 256), (Buckets{48, 64, 96, 128, 192, 256}));
  EXPECT_EQ(LmHeadTuningBuckets(33, 256), (Buckets{48, 64, 96, 128, 192, 256}));
  EXPECT_EQ(LmHeadTuningBuckets(255, 256), (Buckets{256}));
}

TEST(LmHeadTuningBucketsTest, EndsAtAPassRows) {
  EXPECT_EQ(LmHeadTuningBuckets(0, 100), (Buckets{1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 100}));
  EXPECT_EQ(LmHeadTuningBuckets(0, 1), (Buckets{1}));
  EXPECT_EQ(LmHeadTuningBuckets(32, 40), (Buckets{40}));
  for (int64_t above = 0; above < 300; above += 7) {
    for (int64_t up_to = above + 1; up_to < 700; up_to += 13) {
      const Buckets b = LmHeadTuningBuckets(above, up_to);
      ASSERT_FALSE(b.empty()) << above << " " << up_to;
      EXPECT_GT(b.front(), above);
      EXPECT_EQ(b.back(), up_to);
      for (size_t i = 1; i < b.size(); ++i) EXPECT_LT(b[i - 1], b[i]);
    }
  }
}

TEST(LmHeadTuningBucketsTest, NoneWhenTheSmallBatchLmHeadTakesEveryRow) {
  EXPECT_TRUE(LmHeadTuningBuckets(256, 256).empty());
  EXPECT_TRUE(LmHeadTuningBuckets(300, 256).empty());
  EXPECT_TRUE(LmHeadTuningBuckets(0, 0).empty());
}

}  // namespace
}  // namespace ernie
