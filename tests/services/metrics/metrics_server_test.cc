// Process metrics from /proc, the /metrics HTTP server, and the exposition
// checked by Prometheus' own linter (promtool check metrics, Debian package
// `prometheus`; skipped when it is not installed).
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <fstream>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "services/common/metrics/gpu_metrics.h"
#include "services/common/metrics/metrics_http_server.h"
#include "services/common/metrics/process_metrics.h"
#include "tests/services/metrics/http_fetch.h"

namespace ernie::metrics {
namespace {

TEST(ProcessMetrics, ReadsPlausibleValuesFromProc) {
  auto stats = ReadProcessStats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_GT(stats->resident_bytes, 1 << 20);
  EXPECT_GE(stats->virtual_bytes, stats->resident_bytes);
  EXPECT_GE(stats->cpu_seconds, 0);
  const double now = static_cast<double>(std::time(nullptr));
  EXPECT_LE(stats->start_time_seconds, now + 1);
  EXPECT_GT(stats->start_time_seconds, now - 3600);  // this test process started recently
  EXPECT_GE(stats->open_fds, 3);                     // stdin, stdout, stderr
  EXPECT_GE(stats->max_fds, stats->open_fds);
}

TEST(ProcessMetrics, OpenFdsFollowsDescriptors) {
  auto before = ReadProcessStats();
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  auto during = ReadProcessStats();
  std::fclose(file);
  ASSERT_TRUE(before.ok() && during.ok());
  EXPECT_EQ(during->open_fds, before->open_fds + 1);
}

// Runs promtool over `text`; returns its output, or nullopt when promtool is absent.
std::optional<std::pair<int, std::string>> Promtool(const std::string& text) {
  if (access("/usr/bin/promtool", X_OK) != 0) return std::nullopt;
  char path[] = "/tmp/ernie-metrics-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return std::make_pair(-1, std::string("mkstemp failed"));
  (void)!write(fd, text.data(), text.size());
  close(fd);
  const std::string command = std::string("/usr/bin/promtool check metrics < ") + path + " 2>&1";
  std::FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  char buffer[512];
  while (pipe && std::fgets(buffer, sizeof(buffer), pipe)) output += buffer;
  const int rc = pipe ? pclose(pipe) : -1;
  unlink(path);
  return std::make_pair(rc, output);
}

TEST(MetricsHttpServer, ServesTheRegistryAndHealth) {
  Registry registry;
  ASSERT_TRUE(registry.AddConstantLabel("model_name", "demo").ok());
  ASSERT_TRUE(RegisterProcessMetrics(registry).ok());
  auto gpus = RegisterGpuMetrics(registry);
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  auto calls = registry.AddCounter<1>("ernie_test_calls_total", "Calls by method.", {"method"});
  ASSERT_TRUE(calls.ok());
  (*calls)->WithLabels({"Encode"}).Increment(7);
  auto server = MetricsHttpServer::Start("127.0.0.1", 0, &registry);
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_GT((*server)->port(), 0);

  auto metrics = testing::HttpGet((*server)->port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->status, 200);
  EXPECT_TRUE(absl::StrContains(metrics->headers, "text/plain; version=0.0.4")) << metrics->headers;
  EXPECT_TRUE(absl::StrContains(metrics->body, "ernie_test_calls_total{model_name=\"demo\",method=\"Encode\"} 7\n"));
  for (const char* name : {"process_cpu_seconds_total", "process_resident_memory_bytes", "process_start_time_seconds",
                           "process_open_fds", "process_max_fds", "process_virtual_memory_bytes"}) {
    EXPECT_TRUE(absl::StrContains(metrics->body, std::string("# TYPE ") + name)) << name;
  }
  auto health = testing::HttpGet((*server)->port(), "/health");
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->status, 200);
  auto missing = testing::HttpGet((*server)->port(), "/nothing");
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, 404);

  auto lint = Promtool(metrics->body);
  if (!lint) GTEST_SKIP() << "promtool not installed (apt-get install prometheus)";
  EXPECT_EQ(lint->first, 0) << lint->second << "\n" << metrics->body;
  EXPECT_EQ(lint->second, "") << metrics->body;
}

TEST(MetricsHttpServer, RefusesAPortInUseAndABadHost) {
  Registry registry;
  auto first = MetricsHttpServer::Start("127.0.0.1", 0, &registry);
  ASSERT_TRUE(first.ok());
  auto second = MetricsHttpServer::Start("127.0.0.1", (*first)->port(), &registry);
  // SO_REUSEADDR does not allow two listeners on one port.
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(MetricsHttpServer::Start("not-an-ip", 0, &registry).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MetricsHttpServer::Start("127.0.0.1", 70000, &registry).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ernie::metrics
