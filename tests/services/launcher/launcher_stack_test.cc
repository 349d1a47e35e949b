// ernie-serve end to end on the demo checkpoint: it starts the three
// servers, logs where it listens the way vLLM does, answers the tutorial's
// client (Python standard library) and curl, restarts a worker killed with
// SIGKILL, and stops everything cleanly on SIGTERM.
#include <signal.h>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "services/launcher/child_process.h"
#include "services/launcher/http_probe.h"
#include "tests/services/stack_test_util.h"

namespace ernie::launcher {
namespace {

namespace fs = std::filesystem;

using ernie::testing::Shell;
using ernie::testing::WaitFor;
// The servers' logs.
std::string ReadLog(const fs::path& p) { return ernie::testing::ReadFile(p); }

TEST(LauncherStackTest, ServesRestartsAndStops) {
  const fs::path dir = fs::temp_directory_path() / ("ernie_serve_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path log = dir / "serve.log";
  const int port = PickFreePort();
  const std::string cmd = absl::StrCat("exec ", ERNIE_SERVE_BIN, " --port ", port, " --demo-dir ", (dir / "demo").string(),
                                       " --served-model-name ernie --max-model-len 512 --max-num-seqs 8 --threads 1 > ",
                                       log.string(), " 2>&1");
  ChildProcess serve("ernie-serve", "/bin/sh", {"-c", cmd});
  ASSERT_TRUE(serve.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return ReadLog(log).find("Running on http://127.0.0.1:" + std::to_string(port)) != std::string::npos; }, 180))
      << ReadLog(log);
  EXPECT_EQ(HttpGetStatus("127.0.0.1", port, "/ready", 2000), 200);

  // The tutorial's client, standard library only.
  const std::string base = absl::StrCat("http://127.0.0.1:", port);
  int code = -1;
  std::string out = Shell(absl::StrCat("/usr/bin/python3 ", ERNIE_TUTORIAL_CLIENT, " ", base, " ernie"), &code);
  EXPECT_EQ(code, 0) << out;
  // curl: the health check answers 200 with an empty body; chat answers JSON.
  EXPECT_EQ(Shell(absl::StrCat("curl -s -o /dev/null -w '%{http_code} %{size_download}' ", base, "/health")), "200 0");
  out = Shell(absl::StrCat("curl -s ", base, "/v1/chat/completions -H 'Content-Type: application/json' -d "
                           "'{\"model\":\"ernie\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":5}'"));
  EXPECT_NE(out.find("\"chat.completion\""), std::string::npos) << out;

  // kill -9 the worker: the launcher restarts it and the API serves again.
  Shell("pkill -KILL -f 'ernie-worker --model " + (dir / "demo").string() + "'");
  ASSERT_TRUE(WaitFor([&] { return ReadLog(log).find("worker exited with status 137; restarting") != std::string::npos; }, 30))
      << ReadLog(log);
  ASSERT_TRUE(WaitFor([&] {
    return Shell(absl::StrCat("curl -s ", base, "/v1/chat/completions -H 'Content-Type: application/json' -d "
                              "'{\"model\":\"ernie\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":3}'"))
               .find("\"chat.completion\"") != std::string::npos;
  }, 60)) << ReadLog(log);

  // SIGTERM: a clean stop, every server gone.
  kill(serve.pid(), SIGTERM);
  int status = -1;
  ASSERT_TRUE(WaitFor([&] { return serve.Exited(&status); }, 60));
  EXPECT_EQ(status, 0) << ReadLog(log);
  EXPECT_NE(ReadLog(log).find("ernie-serve: stopped"), std::string::npos);
  EXPECT_EQ(Shell("pgrep -f 'ernie-(worker|tokenizer|gateway) --model " + (dir / "demo").string() + "' | wc -l"), "0\n");
  fs::remove_all(dir);
}

// vLLM's `--quantization awq` on an ernie-quantize'd demo checkpoint: the
// worker loads the 4-bit weights (CPU) and the API answers; the float demo
// with the same flag is refused before any server starts.
TEST(LauncherStackTest, ServesAnAwqCheckpointWithQuantizationAwq) {
  const fs::path dir = fs::temp_directory_path() / ("ernie_serve_awq_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  int code = -1;
  std::string out = Shell(absl::StrCat(ERNIE_MAKE_MODEL_BIN, " ", (dir / "demo").string(), " --shape demo --seed 5"), &code);
  ASSERT_EQ(code, 0) << out;
  out = Shell(absl::StrCat(ERNIE_QUANTIZE_BIN, " ", (dir / "demo").string(), " ", (dir / "awq").string(),
                           " --method awq --group-size 64 --calib-tokens 64 --threads 1"), &code);
  ASSERT_EQ(code, 0) << out;

  out = Shell(absl::StrCat(ERNIE_SERVE_BIN, " ", (dir / "demo").string(), " --quantization awq --port 1"), &code);
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("--quantization awq: " + (dir / "demo").string() + "/config.json has no quantization_config"),
            std::string::npos) << out;

  const fs::path log = dir / "serve.log";
  const int port = PickFreePort();
  const std::string cmd = absl::StrCat("exec ", ERNIE_SERVE_BIN, " ", (dir / "awq").string(), " --quantization awq --port ",
                                       port, " --served-model-name ernie --max-model-len 256 --max-num-seqs 4 --threads 1 > ",
                                       log.string(), " 2>&1");
  ChildProcess serve("ernie-serve", "/bin/sh", {"-c", cmd});
  ASSERT_TRUE(serve.Start().ok());
  ASSERT_TRUE(WaitFor([&] { return ReadLog(log).find("Running on http://127.0.0.1:" + std::to_string(port)) != std::string::npos; }, 180))
      << ReadLog(log);
  out = Shell(absl::StrCat("curl -s http://127.0.0.1:", port, "/v1/chat/completions -H 'Content-Type: application/json' -d "
                           "'{\"model\":\"ernie\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":5,"
                           "\"temperature\":0}'"));
  EXPECT_NE(out.find("\"chat.completion\""), std::string::npos) << out << ReadLog(log);
  EXPECT_NE(out.find("\"completion_tokens\":"), std::string::npos) << out;
  kill(serve.pid(), SIGTERM);
  int status = -1;
  ASSERT_TRUE(WaitFor([&] { return serve.Exited(&status); }, 60));
  EXPECT_EQ(status, 0) << ReadLog(log);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ernie::launcher
