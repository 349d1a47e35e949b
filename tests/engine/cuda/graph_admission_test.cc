// GraphAdmission (engine/backend/cuda/graph_admission.h): which step shapes
// get a CUDA graph. Host logic only: runs without a device.
#include "engine/backend/cuda/graph_admission.h"

#include <gtest/gtest.h>

#include "engine/backend/cuda/graph_cache.h"

namespace ernie::testing {
namespace {

using cuda::GraphAdmission;
using cuda::GraphCache;

TEST(GraphAdmissionTest, AKeyIsCapturedTheSecondTimeItIsSeen) {
  GraphAdmission admission(8);
  const uint64_t decode_64 = GraphCache::Key(64, 64, 64);
  EXPECT_FALSE(admission.ShouldCapture(decode_64));  // first step at this size: eager
  EXPECT_TRUE(admission.ShouldCapture(decode_64));   // it came back: capture
  EXPECT_EQ(admission.admitted(), 1);
}

TEST(GraphAdmissionTest, OneOffShapesTakeNoPlaceInTheCache) {
  GraphAdmission admission(2);
  // Mixed steps of decodes and a prompt chunk, each seen once.
  for (int32_t decodes = 1; decodes <= 100; ++decodes)
    EXPECT_FALSE(admission.ShouldCapture(GraphCache::Key(decodes + 128, decodes + 16, decodes + 1)));
  EXPECT_EQ(admission.admitted(), 0);
  // A decode batch size first seen after them still gets its graph.
  const uint64_t decode_37 = GraphCache::Key(37, 37, 37);
  EXPECT_FALSE(admission.ShouldCapture(decode_37));
  EXPECT_TRUE(admission.ShouldCapture(decode_37));
}

TEST(GraphAdmissionTest, NothingIsCapturedPastTheCacheSize) {
  GraphAdmission admission(2);
  for (int32_t b = 1; b <= 3; ++b) {
    const uint64_t key = GraphCache::Key(b, b, b);
    EXPECT_FALSE(admission.ShouldCapture(key));
    EXPECT_EQ(admission.ShouldCapture(key), b <= 2) << "batch " << b;
  }
  EXPECT_EQ(admission.admitted(), 2);
  GraphAdmission off(0);  // graphs turned off
  EXPECT_FALSE(off.ShouldCapture(1));
  EXPECT_FALSE(off.ShouldCapture(1));
}

TEST(GraphAdmissionTest, KeysSeenOnceAreForgottenInBulkPastTheBound) {
  GraphAdmission admission(8, /*max_remembered=*/3);
  EXPECT_FALSE(admission.ShouldCapture(1));
  EXPECT_FALSE(admission.ShouldCapture(2));
  EXPECT_FALSE(admission.ShouldCapture(3));
  EXPECT_FALSE(admission.ShouldCapture(4));  // the bound: 1, 2 and 3 are forgotten
  EXPECT_FALSE(admission.ShouldCapture(1));  // so 1 counts as new again
  EXPECT_TRUE(admission.ShouldCapture(4));   // 4 was kept
  EXPECT_TRUE(admission.ShouldCapture(1));
}

}  // namespace
}  // namespace ernie::testing
