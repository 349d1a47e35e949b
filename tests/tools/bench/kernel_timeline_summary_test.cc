// The in-graph timeline's breakdown (tools/bench/kernel_timeline_summary.h)
// on hand-made kernel records: overlapping (programmatic dependent) launches,
// idle gaps, kernels hidden inside others, grouping, and kernel names.
#include "tools/bench/kernel_timeline_summary.h"

#include <gtest/gtest.h>

namespace ernie::bench {
namespace {

KernelRecord Kernel(const std::string& name, uint64_t start_us, uint64_t end_us, int32_t grid = 1,
                    int32_t dynamic_smem = 0) {
  return {.name = name, .start_ns = start_us * 1000, .end_ns = end_us * 1000, .grid = grid, .block = 128,
          .dynamic_smem = dynamic_smem};
}

TEST(KernelTimelineSummaryTest, IncrementsAndGapsAddUpToTheSpan) {
  // a: 0-10; b starts early (a dependent) and ends at 14: +4; c inside b: +0;
  // a gap of 6 us; d: 20-23: +3.
  const std::vector<KernelRecord> step = {Kernel("a", 0, 10), Kernel("b", 5, 14), Kernel("c", 6, 12),
                                          Kernel("d", 20, 23)};
  const nlohmann::json s = Summarize(step, 16);
  EXPECT_EQ(s["kernels"], 4);
  EXPECT_DOUBLE_EQ(s["span_us"].get<double>(), 23.0);
  EXPECT_DOUBLE_EQ(s["gaps_us"].get<double>(), 6.0);
  EXPECT_DOUBLE_EQ(s["sum_duration_us"].get<double>(), 10 + 9 + 6 + 3);
  const auto& seq = s["sequence"];
  ASSERT_EQ(seq.size(), 4u);
  EXPECT_DOUBLE_EQ(seq[0]["increment_us"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(seq[1]["increment_us"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(seq[2]["increment_us"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(seq[3]["increment_us"].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(seq[3]["gap_us"].get<double>(), 6.0);
  EXPECT_DOUBLE_EQ(seq[1]["start_us"].get<double>(), 5.0);
  double total = s["gaps_us"].get<double>();
  for (const auto& k : s["by_kernel"]) total += k["increment_us"].get<double>();
  EXPECT_DOUBLE_EQ(total, s["span_us"].get<double>());
}

TEST(KernelTimelineSummaryTest, GroupsByNameAndShapeLargestIncrementFirst) {
  // One kernel name at two launch shapes (two linears), launched twice each.
  const std::vector<KernelRecord> step = {Kernel("Linear<1>", 0, 2, 320, 4096), Kernel("Linear<1>", 2, 7, 384, 4096),
                                          Kernel("Linear<1>", 7, 9, 320, 4096), Kernel("Linear<1>", 9, 14, 384, 4096),
                                          Kernel("Merge", 14, 15, 2)};
  const nlohmann::json s = Summarize(step, 2);
  const auto& by = s["by_kernel"];
  ASSERT_EQ(by.size(), 3u);
  EXPECT_EQ(by[0]["kernel"], "Linear<1> [384x128, 4 KB]");
  EXPECT_EQ(by[0]["count"], 2);
  EXPECT_DOUBLE_EQ(by[0]["increment_us"].get<double>(), 10.0);
  EXPECT_EQ(by[1]["kernel"], "Linear<1> [320x128, 4 KB]");
  EXPECT_DOUBLE_EQ(by[1]["increment_us"].get<double>(), 4.0);
  EXPECT_EQ(by[2]["kernel"], "Merge [2x128]");
  EXPECT_EQ(s["sequence"].size(), 2u);  // sequence_len
}

TEST(KernelTimelineSummaryTest, NoKernels) { EXPECT_EQ(Summarize({}, 4)["kernels"], 0); }

TEST(KernelTimelineSummaryTest, ShortNamesDropNamespacesReturnTypeAndParameters) {
  // A kernel in an anonymous namespace, as nvcc mangles it.
  EXPECT_EQ(ShortKernelName("_ZN5ernie4cuda49_GLOBAL__N__c4d5150b_16_decode_linear_cu_24b9152518DecodeLinearKernel"
                            "ILi1EEEvNS0_18DecodeLinearParamsE"),
            "DecodeLinearKernel<1>");
  EXPECT_EQ(ShortKernelName("_Z6KernelPfi"), "Kernel");
  // Library kernels that are not mangled keep their names.
  EXPECT_EQ(ShortKernelName("nvjet_sm90_tss_64x8_64x16_1x2_h_bz_TNT"), "nvjet_sm90_tss_64x8_64x16_1x2_h_bz_TNT");
  EXPECT_EQ(ShortKernelName(nullptr), "?");
}

}  // namespace
}  // namespace ernie::bench
