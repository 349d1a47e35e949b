// The real three-process stack (ernie-serve on the demo checkpoint) seen the
// way an operator sees it: every process's /metrics passes `promtool check
// metrics`, carries the names deploy/README.md promises, is scraped by a real
// Prometheus server (loopback, temp dir), and holds every metric the Grafana
// dashboard queries. Then draining: SIGTERM to the worker and to the gateway
// lets a running stream finish while new work is refused.
// promtool / prometheus come from Debian's `prometheus` package; without it
// those checks are skipped (reported as such).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "services/launcher/child_process.h"
#include "services/launcher/http_probe.h"
#include "tests/services/metrics/http_fetch.h"
#include "tests/services/stack_test_util.h"

namespace ernie::metrics {
namespace {

namespace fs = std::filesystem;
using launcher::ChildProcess;

using ernie::testing::ReadFile;
using ernie::testing::Shell;
// Polls every 20 ms: the metrics tests wait for short-lived states.
bool WaitFor(const std::function<bool()>& ready, int seconds) {
  return ernie::testing::WaitFor(ready, seconds, std::chrono::milliseconds(20));
}

// Sample names of an exposition ("ernie_x_bucket", "process_open_fds", ...).
std::set<std::string> SampleNames(const std::string& text) {
  std::set<std::string> names;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    const size_t end = line.find_first_of("{ ");
    names.insert(std::string(line.substr(0, end)));
  }
  return names;
}

// One ernie-serve stack for every test of the suite.
class StackObservabilityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("ernie_metrics_test_" + std::to_string(::getpid())));
    fs::create_directories(*dir_);
    port_ = launcher::PickFreePort();
    const fs::path log = *dir_ / "serve.log";
    const std::string cmd = absl::StrCat(
        "exec ", ERNIE_SERVE_BIN, " --port ", port_, " --demo-dir ", (*dir_ / "demo").string(),
        " --served-model-name ernie --max-model-len 512 --max-num-seqs 8 --threads 1 > ", log.string(), " 2>&1");
    serve_ = new ChildProcess("ernie-serve", "/bin/sh", {"-c", cmd});
    if (!serve_->Start().ok()) return;
    const std::regex metrics_line(R"(metrics: \S+ \(gateway\), http://127\.0\.0\.1:(\d+)/metrics \(tokenizer\), )"
                                  R"(http://127\.0\.0\.1:(\d+)/metrics \(worker\))");
    WaitFor([&] {
      std::smatch m;
      const std::string text = ReadFile(log);
      if (!std::regex_search(text, m, metrics_line)) return false;
      tokenizer_metrics_port_ = std::stoi(m[1]);
      worker_metrics_port_ = std::stoi(m[2]);
      return true;
    }, 180);
    for (int i = 0; i < 4; ++i) Chat(i % 2 == 0, 8);  // traffic: streamed and not
  }

  static void TearDownTestSuite() {
    if (serve_ != nullptr) {
      kill(serve_->pid(), SIGTERM);
      int status = 0;
      WaitFor([&] { return serve_->Exited(&status); }, 60);
      delete serve_;
    }
    std::error_code ignored;
    fs::remove_all(*dir_, ignored);
    delete dir_;
  }

  static std::string Log() { return ReadFile(*dir_ / "serve.log"); }

  // A chat completion through curl; returns the body.
  static std::string Chat(bool stream, int max_tokens, int* http_code = nullptr) {
    const std::string body = absl::StrCat(
        R"({"model":"ernie","messages":[{"role":"user","content":"Hello there"}],"max_tokens":)", max_tokens,
        R"(,"ignore_eos":true,"stream":)", stream ? "true" : "false", "}");
    std::string out = Shell(absl::StrCat("curl -s -w '\\n%{http_code}' http://127.0.0.1:", port_,
                                         "/v1/chat/completions -H 'Content-Type: application/json' -d '", body, "'"));
    const size_t last = out.rfind('\n');
    if (http_code) *http_code = last == std::string::npos ? 0 : std::atoi(out.c_str() + last + 1);
    return out.substr(0, last);
  }

  static std::string Scrape(int port) {
    auto answer = testing::HttpGet(port, "/metrics");
    return answer.ok() && answer->status == 200 ? answer->body : std::string();
  }

  void SetUp() override {
    ASSERT_NE(serve_, nullptr);
    ASSERT_GT(worker_metrics_port_, 0) << "ernie-serve printed no metrics line:\n" << Log();
    ASSERT_TRUE(WaitFor([] { return launcher::HttpGetStatus("127.0.0.1", port_, "/ready", 1000) == 200; }, 60))
        << Log();
  }

  static inline fs::path* dir_ = nullptr;
  static inline ChildProcess* serve_ = nullptr;
  static inline int port_ = 0, tokenizer_metrics_port_ = 0, worker_metrics_port_ = 0;
};

TEST_F(StackObservabilityTest, EveryProcessExportsItsMetricsAndPassesPromtool) {
  const std::string gateway = Scrape(port_), tokenizer = Scrape(tokenizer_metrics_port_),
                    worker = Scrape(worker_metrics_port_);
  const std::set<std::string> common = {"process_cpu_seconds_total", "process_resident_memory_bytes",
                                        "process_start_time_seconds", "process_open_fds"};
  const std::vector<std::pair<std::string, std::set<std::string>>> expected = {
      {gateway,
       {"ernie_gateway_requests_total", "ernie_gateway_requests_in_flight", "ernie_gateway_streams_in_flight",
        "ernie_gateway_client_disconnects_total", "ernie_gateway_upstream_retries_total",
        "ernie_gateway_time_to_first_token_seconds_bucket", "ernie_gateway_prompt_ready_seconds_bucket",
        "ernie_gateway_worker_first_token_seconds_bucket", "ernie_gateway_inter_token_latency_seconds_bucket",
        "ernie_gateway_e2e_request_latency_seconds_count", "ernie_gateway_draining"}},
      {tokenizer, {"ernie_tokenizer_requests_total", "ernie_tokenizer_request_duration_seconds_bucket"}},
      {worker,
       {"ernie_requests_running", "ernie_requests_waiting", "ernie_kv_cache_usage_ratio",
        "ernie_prefix_cache_queries_tokens_total", "ernie_prefix_cache_hits_tokens_total", "ernie_preemptions_total",
        "ernie_prompt_tokens_total", "ernie_generation_tokens_total", "ernie_request_success_total",
        "ernie_time_to_first_token_seconds_bucket", "ernie_inter_token_latency_seconds_bucket",
        "ernie_e2e_request_latency_seconds_bucket", "ernie_request_queue_time_seconds_bucket",
        "ernie_request_prefill_time_seconds_bucket", "ernie_request_decode_time_seconds_bucket",
        "ernie_request_prompt_tokens_bucket", "ernie_request_generation_tokens_bucket", "ernie_step_tokens_bucket",
        "ernie_step_batch_size_bucket", "ernie_cache_config_info", "ernie_model_weight_bytes",
        "ernie_kv_cache_bytes"}}};
  for (const auto& [text, names] : expected) {
    ASSERT_FALSE(text.empty()) << Log();
    const std::set<std::string> have = SampleNames(text);
    for (const auto& name : names) EXPECT_TRUE(have.contains(name)) << name << " missing in:\n" << text;
    for (const auto& name : common) EXPECT_TRUE(have.contains(name)) << name;
  }
  // The traffic of SetUpTestSuite is visible with its meaning: 4 chats of 8 tokens, finished by length.
  EXPECT_NE(worker.find("ernie_request_success_total{model_name=\"ernie\",finish_reason=\"length\"} 4\n"),
            std::string::npos)
      << worker;
  EXPECT_NE(worker.find("ernie_request_generation_tokens_sum{model_name=\"ernie\"} 32\n"), std::string::npos);
  EXPECT_NE(gateway.find("route=\"/v1/chat/completions\",status=\"200\"} 4\n"), std::string::npos) << gateway;
  EXPECT_NE(tokenizer.find("method=\"ApplyChatTemplate\",code=\"OK\"} 4\n"), std::string::npos) << tokenizer;

  if (access("/usr/bin/promtool", X_OK) != 0) GTEST_SKIP() << "promtool not installed (apt-get install prometheus)";
  for (const auto& [text, names] : expected) {
    const fs::path file = *dir_ / "scrape.txt";
    std::ofstream(file) << text;
    int code = -1;
    const std::string lint = Shell("/usr/bin/promtool check metrics < " + file.string(), &code);
    EXPECT_EQ(code, 0) << lint;
    EXPECT_EQ(lint, "") << lint;
  }
}

TEST_F(StackObservabilityTest, DashboardQueriesOnlyMetricsTheStackExports) {
  std::set<std::string> scraped;
  for (int port : {port_, tokenizer_metrics_port_, worker_metrics_port_}) scraped.merge(SampleNames(Scrape(port)));
  // NVML metrics exist only on CUDA workers; this stack runs the CPU backend.
  const std::set<std::string> gpu_only = {"ernie_gpu_memory_used_bytes", "ernie_gpu_memory_total_bytes",
                                          "ernie_gpu_utilization_ratio"};
  const nlohmann::json dashboard = nlohmann::json::parse(ReadFile(ERNIE_DASHBOARD_JSON));
  // Identifiers in PromQL that are metric names: ernie_* and process_* (functions,
  // labels and keywords never start so).
  const std::regex metric_name(R"(\b((?:ernie|process)_[a-zA-Z0-9_]+)\b)");
  int expressions = 0;
  std::set<std::string> queried;
  std::function<void(const nlohmann::json&)> walk = [&](const nlohmann::json& node) {
    if (node.is_object()) {
      if (node.contains("expr") && node["expr"].is_string()) {
        ++expressions;
        const std::string expr = node["expr"];
        for (std::sregex_iterator it(expr.begin(), expr.end(), metric_name), end; it != end; ++it)
          queried.insert((*it)[1]);
      }
      if (node.contains("query") && node["query"].is_object() && node["query"].contains("query")) {
        const std::string expr = node["query"]["query"];
        for (std::sregex_iterator it(expr.begin(), expr.end(), metric_name), end; it != end; ++it)
          queried.insert((*it)[1]);
      }
      for (const auto& [key, value] : node.items()) walk(value);
    } else if (node.is_array()) {
      for (const auto& value : node) walk(value);
    }
  };
  walk(dashboard);
  EXPECT_GE(expressions, 30);
  for (const auto& name : queried) {
    if (gpu_only.contains(name)) continue;
    EXPECT_TRUE(scraped.contains(name)) << "the dashboard queries " << name << ", which no process exports";
  }
  for (const auto& name : gpu_only) EXPECT_TRUE(queried.contains(name)) << name;  // the GPU panels exist
  // The variables the issue asks for.
  std::set<std::string> variables;
  for (const auto& v : dashboard["templating"]["list"]) variables.insert(v["name"].get<std::string>());
  EXPECT_EQ(variables, (std::set<std::string>{"datasource", "model", "instance"}));
}

TEST_F(StackObservabilityTest, ARealPrometheusScrapesAllThreeProcesses) {
  if (access("/usr/bin/prometheus", X_OK) != 0) GTEST_SKIP() << "prometheus not installed (apt-get install prometheus)";
  const fs::path config = *dir_ / "prometheus.yml";
  std::ofstream(config) << absl::StrCat(
      "global: {scrape_interval: 1s}\nscrape_configs:\n", "  - job_name: ernie-gateway\n",
      "    static_configs: [{targets: ['127.0.0.1:", port_, "']}]\n", "  - job_name: ernie-tokenizer\n",
      "    static_configs: [{targets: ['127.0.0.1:", tokenizer_metrics_port_, "']}]\n",
      "  - job_name: ernie-worker\n", "    static_configs: [{targets: ['127.0.0.1:", worker_metrics_port_, "']}]\n");
  const int prometheus_port = launcher::PickFreePort();
  ChildProcess prometheus("prometheus", "/usr/bin/prometheus",
                          {"--config.file=" + config.string(), "--storage.tsdb.path=" + (*dir_ / "tsdb").string(),
                           absl::StrCat("--web.listen-address=127.0.0.1:", prometheus_port),
                           "--log.level=warn"});
  ASSERT_TRUE(prometheus.Start().ok());
  auto query = [&](const std::string& promql) {
    const std::string out = Shell(absl::StrCat("curl -s --get http://127.0.0.1:", prometheus_port,
                                               "/api/v1/query --data-urlencode 'query=", promql, "'"));
    return nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  };
  auto count = [&](const std::string& promql) -> int {
    const nlohmann::json answer = query(promql);
    if (!answer.is_object() || answer.value("status", "") != "success") return -1;
    return static_cast<int>(answer["data"]["result"].size());
  };
  // Traffic while Prometheus scrapes, so rates have two points.
  ASSERT_TRUE(WaitFor([&] { return count("up == 1") == 3; }, 30)) << query("up").dump();
  Chat(true, 8);
  Chat(false, 8);
  EXPECT_TRUE(WaitFor([&] {
    return count("rate(ernie_generation_tokens_total[5s]) > 0") == 1;
  }, 20)) << query("ernie_generation_tokens_total").dump();
  EXPECT_EQ(count("process_cpu_seconds_total"), 3);
  EXPECT_EQ(count("ernie_gateway_requests_total{route=\"/v1/chat/completions\",status=\"200\"}"), 1);
  EXPECT_EQ(count("ernie_tokenizer_requests_total{method=\"ApplyChatTemplate\"}"), 1);
  EXPECT_EQ(count("histogram_quantile(0.9, rate(ernie_time_to_first_token_seconds_bucket[10s]))"), 1);
  EXPECT_EQ(count("ernie_cache_config_info{backend=\"cpu\",block_size=\"16\"}"), 1);
  kill(prometheus.pid(), SIGTERM);
  int status = 0;
  WaitFor([&] { return prometheus.Exited(&status); }, 20);
}

// Finds the pid of one of the stack's servers (children of this test's ernie-serve).
// pgrep -f also matches the shell that runs it (its command line holds the
// pattern); once pids wrap (pid_max 32768 on the CI machines, passed during
// a build) that shell can list first, and a SIGTERM sent to it reached no
// server (seen once in CI). So the match must be the binary itself.
int ServerPid(const std::string& binary, const fs::path& demo) {
  std::istringstream pids(Shell("pgrep -f '" + binary + " --model " + demo.string() + "'"));
  for (std::string line; std::getline(pids, line);) {
    const int pid = std::atoi(line.c_str());
    std::string comm = pid > 0 ? ReadFile(fs::path("/proc") / std::to_string(pid) / "comm") : "";
    while (!comm.empty() && comm.back() == '\n') comm.pop_back();
    if (comm == binary) return pid;
  }
  return 0;
}

TEST_F(StackObservabilityTest, WorkerAndGatewayDrainOnSigterm) {
  const fs::path demo = *dir_ / "demo";
  for (const std::string server : {"ernie-worker", "ernie-gateway"}) {
    SCOPED_TRACE(server);
    ASSERT_TRUE(WaitFor([] { return launcher::HttpGetStatus("127.0.0.1", port_, "/ready", 1000) == 200; }, 60));
    const int pid = ServerPid(server, demo);
    ASSERT_GT(pid, 0) << Log();
    // A long stream runs while the server is told to stop.
    auto stream = std::async(std::launch::async, [] {
      int code = 0;
      std::string body = Chat(true, 480, &code);
      return std::make_pair(code, body);
    });
    ASSERT_TRUE(WaitFor([&] {
      const std::string gateway = Scrape(port_);
      return gateway.find("ernie_gateway_streams_in_flight{model_name=\"ernie\"} 1\n") != std::string::npos;
    }, 20));
    kill(pid, SIGTERM);
    // New work is refused: the gateway says 503 (draining or no serving worker). Not timed tightly:
    // under ctest -j2 on two cores, beside the CPU model generating and other stacks, the servers
    // can wait seconds for a core (seen once in CI with a 5 s bound).
    ASSERT_TRUE(WaitFor([] { return launcher::HttpGetStatus("127.0.0.1", port_, "/ready", 1000) == 503; }, 20))
        << Log();
    int code = 0;
    Chat(false, 4, &code);
    EXPECT_EQ(code, 503);
    // The running stream finishes whole.
    const auto [stream_code, body] = stream.get();
    EXPECT_EQ(stream_code, 200);
    EXPECT_NE(body.find("\"finish_reason\":\"length\""), std::string::npos) << body.substr(0, 400);
    EXPECT_NE(body.find("data: [DONE]"), std::string::npos);
    // It exited 0 (the launcher reports and restarts it).
    EXPECT_TRUE(WaitFor([&] { return kill(pid, 0) != 0; }, 20));
    EXPECT_TRUE(WaitFor([&] { return Log().find(server.substr(6) + " exited with status 0") != std::string::npos; },
                        20))
        << Log();
  }
}

}  // namespace
}  // namespace ernie::metrics
