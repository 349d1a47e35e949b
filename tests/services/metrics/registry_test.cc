// The metrics library: values, families, names, and the exact text format.
#include "services/common/metrics/registry.h"

#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace ernie::metrics {
namespace {

TEST(TextFormat, FormatsValuesTheWayPrometheusReadsThem) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(42), "42");
  EXPECT_EQ(FormatValue(-3), "-3");
  EXPECT_EQ(FormatValue(1e6), "1000000");
  EXPECT_EQ(FormatValue(0.025), "0.025");
  EXPECT_EQ(FormatValue(2.5e-5), "2.5e-05");
  EXPECT_EQ(FormatValue(1.0 / 0.0), "+Inf");
  EXPECT_EQ(FormatValue(-1.0 / 0.0), "-Inf");
  EXPECT_EQ(FormatValue(0.0 / 0.0), "NaN");
}

TEST(TextFormat, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(EscapeHelp("say \"x\"\\\n"), "say \"x\"\\\\\\n");
}

TEST(TextFormat, ChecksNames) {
  EXPECT_TRUE(IsValidMetricName("ernie_requests_total"));
  EXPECT_TRUE(IsValidMetricName("job:rate5m"));
  EXPECT_FALSE(IsValidMetricName("1abc"));
  EXPECT_FALSE(IsValidMetricName("ernie-requests"));
  EXPECT_FALSE(IsValidMetricName(""));
  EXPECT_TRUE(IsValidLabelName("finish_reason"));
  EXPECT_FALSE(IsValidLabelName("__name__"));
  EXPECT_FALSE(IsValidLabelName("a:b"));
}

TEST(Registry, WritesCountersAndGaugesWithHelpTypeAndLabels) {
  Registry registry;
  auto requests = registry.AddCounter<2>("ernie_test_requests_total", "Requests.\nTwo lines.", {"route", "status"});
  ASSERT_TRUE(requests.ok()) << requests.status();
  auto running = registry.AddGauge("ernie_test_running", "Running now.");
  ASSERT_TRUE(running.ok());
  (*requests)->WithLabels({"/v1/chat", "200"}).Increment();
  (*requests)->WithLabels({"/v1/chat", "200"}).Increment(2);
  (*requests)->WithLabels({"/a\"b", "404"}).Increment();
  (*requests)->WithLabels({"/v1/chat", "200"}).Increment(-5);  // ignored: counters only go up
  (*running)->Get().Set(3);
  (*running)->Get().Add(-1.5);
  EXPECT_EQ(registry.Exposition(),
            "# HELP ernie_test_requests_total Requests.\\nTwo lines.\n"
            "# TYPE ernie_test_requests_total counter\n"
            "ernie_test_requests_total{route=\"/a\\\"b\",status=\"404\"} 1\n"
            "ernie_test_requests_total{route=\"/v1/chat\",status=\"200\"} 3\n"
            "# HELP ernie_test_running Running now.\n"
            "# TYPE ernie_test_running gauge\n"
            "ernie_test_running 1.5\n");
}

TEST(Registry, WritesHistogramsCumulativelyWithSumAndCount) {
  Registry registry;
  ASSERT_TRUE(registry.AddConstantLabel("model_name", "m1").ok());
  auto latency = registry.AddHistogram<1>("ernie_test_latency_seconds", "Latency.", {0.1, 0.5, 2}, {"kind"});
  ASSERT_TRUE(latency.ok()) << latency.status();
  Histogram& h = (*latency)->WithLabels({"x"});
  h.Observe(0.05);
  h.Observe(0.1);   // on a bound: that bucket (le is inclusive)
  h.Observe(0.3, 3);
  h.Observe(7);     // beyond every bound: +Inf only
  EXPECT_EQ(registry.Exposition(),
            "# HELP ernie_test_latency_seconds Latency.\n"
            "# TYPE ernie_test_latency_seconds histogram\n"
            "ernie_test_latency_seconds_bucket{model_name=\"m1\",kind=\"x\",le=\"0.1\"} 2\n"
            "ernie_test_latency_seconds_bucket{model_name=\"m1\",kind=\"x\",le=\"0.5\"} 5\n"
            "ernie_test_latency_seconds_bucket{model_name=\"m1\",kind=\"x\",le=\"2\"} 5\n"
            "ernie_test_latency_seconds_bucket{model_name=\"m1\",kind=\"x\",le=\"+Inf\"} 6\n"
            "ernie_test_latency_seconds_sum{model_name=\"m1\",kind=\"x\"} 8.05\n"
            "ernie_test_latency_seconds_count{model_name=\"m1\",kind=\"x\"} 6\n");
}

TEST(Registry, ReadsCallbacksAtScrapeTime) {
  Registry registry;
  double total = 5;
  auto family = registry.AddCounter<1>("ernie_test_tokens_total", "Tokens.", {"kind"});
  ASSERT_TRUE(family.ok());
  (*family)->AddCallback({"prompt"}, [&total] { return total; });
  EXPECT_TRUE(absl::StrContains(registry.Exposition(), "ernie_test_tokens_total{kind=\"prompt\"} 5\n"));
  total = 9;
  EXPECT_TRUE(absl::StrContains(registry.Exposition(), "ernie_test_tokens_total{kind=\"prompt\"} 9\n"));
}

TEST(Registry, RefusesBadNamesDuplicatesAndBadBuckets) {
  Registry registry;
  EXPECT_EQ(registry.AddCounter("ernie_requests", "no _total").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddGauge("ernie-bad", "dash").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddGauge<1>("ernie_g", "bad label", {"__x"}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddGauge<2>("ernie_g", "repeated", {"a", "a"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddHistogram<1>("ernie_h", "le", {1.0}, {"le"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddHistogram("ernie_h", "unsorted", {1.0, 1.0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.AddHistogram("ernie_h", "empty", {}).status().code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(registry.AddGauge("ernie_g", "ok").ok());
  auto twice = registry.AddGauge("ernie_g", "again");
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(absl::StrContains(twice.status().message(), "ernie_g"));
  EXPECT_EQ(registry.AddConstantLabel("model_name", "late").code(), absl::StatusCode::kFailedPrecondition);
}

TEST(Registry, CountsExactlyUnderConcurrentUpdates) {
  Registry registry;
  auto tokens = registry.AddCounter("ernie_test_concurrent_total", "x");
  auto gaps = registry.AddHistogram("ernie_test_gap_seconds", "x", {0.5, 1.0});
  ASSERT_TRUE(tokens.ok() && gaps.ok());
  Counter& counter = (*tokens)->Get();
  Histogram& histogram = (*gaps)->Get();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25000; ++i) {
        counter.Increment();
        histogram.Observe(t % 2 == 0 ? 0.25 : 0.75);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(counter.value(), 100000);
  const Histogram::Snapshot snapshot = histogram.Read();
  EXPECT_EQ(snapshot.cumulative[0], 50000u);
  EXPECT_EQ(snapshot.cumulative[2], 100000u);
  EXPECT_DOUBLE_EQ(snapshot.sum, 50000 * 0.25 + 50000 * 0.75);
}

TEST(Buckets, Exponential) {
  EXPECT_EQ(ExponentialBuckets(1, 2, 4), (std::vector<double>{1, 2, 4, 8}));
}

}  // namespace
}  // namespace ernie::metrics
