#include "services/launcher/launcher_options.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "services/launcher/vllm_compat.h"

namespace ernie::launcher {
namespace {

namespace fs = std::filesystem;

bool Contains(const std::vector<std::string>& v, const std::vector<std::string>& seq) {
  return std::search(v.begin(), v.end(), seq.begin(), seq.end()) != v.end();
}

TEST(LauncherOptionsTest, ForwardsEachOptionToItsServer) {
  auto o = ParseLauncherOptions({"/m", "--port", "9000", "--max-num-seqs", "8", "--api-key", "k1", "--api-key=k2",
                                 "--max-model-len", "512", "--no-enable-prefix-caching", "--max-input-bytes", "99",
                                 "--no-async-scheduling", "--no-lm-head-tuning"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->model, "/m");
  EXPECT_EQ(o->port, 9000);
  EXPECT_FALSE(o->demo);
  EXPECT_TRUE(Contains(o->worker_args, {"--max-num-seqs", "8"}));
  EXPECT_TRUE(Contains(o->worker_args, {"--max-model-len", "512"}));
  EXPECT_TRUE(Contains(o->gateway_args, {"--max-model-len", "512"}));
  EXPECT_TRUE(Contains(o->worker_args, {"--no-enable-prefix-caching"}));
  EXPECT_TRUE(Contains(o->worker_args, {"--no-async-scheduling"}));
  EXPECT_TRUE(Contains(o->worker_args, {"--no-lm-head-tuning"}));
  EXPECT_TRUE(Contains(o->gateway_args, {"--api-key", "k1"}));
  EXPECT_TRUE(Contains(o->gateway_args, {"--api-key", "k2"}));
  EXPECT_TRUE(Contains(o->tokenizer_args, {"--max-input-bytes", "99"}));
  EXPECT_FALSE(Contains(o->worker_args, {"--api-key", "k1"}));
}

TEST(LauncherOptionsTest, VllmServeSpelling) {
  // `vllm serve MODEL ...` with only "vllm" replaced.
  auto o = ParseLauncherOptions({"serve", "/models/ERNIE-4.5-0.3B-PT", "--host", "0.0.0.0", "--trust-remote-code",
                                 "--served-model-name", "ernie", "--disable-log-requests", "--seed", "0"});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->model, "/models/ERNIE-4.5-0.3B-PT");
  EXPECT_EQ(o->host, "0.0.0.0");
  EXPECT_TRUE(Contains(o->gateway_args, {"--served-model-name", "ernie"}));
}

TEST(LauncherOptionsTest, NoModelMeansDemo) {
  auto o = ParseLauncherOptions({});
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->demo);
  EXPECT_NE(o->demo_dir.find("demo-model"), std::string::npos);
}

TEST(LauncherOptionsTest, UnknownOptionsNameTheClosestKnownOne) {
  auto o = ParseLauncherOptions({"/m", "--max-num-seq", "4"});
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(std::string(o.status().message()), "unknown option --max-num-seq (did you mean --max-num-seqs?)");
  o = ParseLauncherOptions({"/m", "--gpu-memory-utilisation", "0.5"});
  EXPECT_NE(std::string(o.status().message()).find("did you mean --gpu-memory-utilization?"), std::string::npos);
  o = ParseLauncherOptions({"/m", "--port"});
  EXPECT_NE(std::string(o.status().message()).find("--port needs a value"), std::string::npos);
  o = ParseLauncherOptions({"/m", "/other"});
  EXPECT_NE(std::string(o.status().message()).find("given once"), std::string::npos);
  o = ParseLauncherOptions({"/m", "--port", "99999"});
  EXPECT_NE(std::string(o.status().message()).find("--port"), std::string::npos);
}

class VllmCompatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("ernie_vllm_" + std::to_string(::getpid()));
    fs::create_directories(root_ / "model");
    std::ofstream(root_ / "model/config.json") << R"({"architectures": ["Ernie4_5_ForCausalLM"]})";
  }
  void TearDown() override { fs::remove_all(root_); }
  fs::path root_;
};

TEST_F(VllmCompatTest, RefusesWhatItCannotDo) {
  LauncherOptions o;
  o.tensor_parallel_size = 2;
  EXPECT_NE(std::string(ApplyVllmOptions((root_ / "model").string(), &o).status().message()).find("only 1"),
            std::string::npos);
  o = LauncherOptions{};
  o.dtype = "fp8";
  EXPECT_NE(std::string(ApplyVllmOptions((root_ / "model").string(), &o).status().message()).find("--dtype 'fp8'"),
            std::string::npos);
  o = LauncherOptions{};
  o.quantization = "awq";
  EXPECT_NE(std::string(ApplyVllmOptions((root_ / "model").string(), &o).status().message()).find("not an AutoAWQ"),
            std::string::npos);
}

TEST_F(VllmCompatTest, AcceptsAnAwqCheckpoint) {
  std::ofstream(root_ / "model/config.json")
      << R"({"architectures": ["Ernie4_5_ForCausalLM"], "quantization_config": {"quant_method": "awq", "bits": 4}})";
  LauncherOptions o;
  o.quantization = "awq";
  auto notes = ApplyVllmOptions((root_ / "model").string(), &o);
  ASSERT_TRUE(notes.ok()) << notes.status();
  ASSERT_EQ(notes->size(), 1u);
  EXPECT_NE((*notes)[0].find("AutoAWQ checkpoint"), std::string::npos);
  o = LauncherOptions{};  // an AWQ checkpoint serves without the flag too, as in vLLM
  EXPECT_TRUE(ApplyVllmOptions((root_ / "model").string(), &o).ok());
  o.quantization = "gptq";
  EXPECT_NE(std::string(ApplyVllmOptions((root_ / "model").string(), &o).status().message()).find("--quantization 'gptq'"),
            std::string::npos);
}

TEST_F(VllmCompatTest, GenerationConfigModes) {
  LauncherOptions o;
  o.generation_config = "vllm";
  ASSERT_TRUE(ApplyVllmOptions((root_ / "model").string(), &o).ok());
  EXPECT_TRUE(Contains(o.gateway_args, {"--generation-config", "{}"}));
  fs::create_directories(root_ / "gen");
  std::ofstream(root_ / "gen/generation_config.json") << R"({"temperature": 0.3})";
  o = LauncherOptions{};
  o.generation_config = (root_ / "gen").string();
  ASSERT_TRUE(ApplyVllmOptions((root_ / "model").string(), &o).ok());
  EXPECT_TRUE(Contains(o.gateway_args, {"--generation-config", R"({"temperature": 0.3})"}));
  o = LauncherOptions{};
  o.generation_config = (root_ / "nowhere").string();
  EXPECT_FALSE(ApplyVllmOptions((root_ / "model").string(), &o).ok());
}

TEST_F(VllmCompatTest, RepoIdsResolveInTheHuggingFaceCache) {
  const fs::path snap = root_ / "hub/models--baidu--ERNIE-4.5-0.3B-PT/snapshots/abc123";
  fs::create_directories(snap);
  fs::create_directories(root_ / "hub/models--baidu--ERNIE-4.5-0.3B-PT/refs");
  std::ofstream(snap / "config.json") << "{}";
  std::ofstream(root_ / "hub/models--baidu--ERNIE-4.5-0.3B-PT/refs/main") << "abc123\n";
  setenv("HF_HUB_CACHE", (root_ / "hub").c_str(), 1);
  auto dir = ResolveModelDir("baidu/ERNIE-4.5-0.3B-PT");
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(*dir, snap.string());
  auto missing = ResolveModelDir("baidu/ERNIE-4.5-21B-A3B-PT");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(std::string(missing.status().message()).find("never downloads"), std::string::npos);
  unsetenv("HF_HUB_CACHE");
}

}  // namespace
}  // namespace ernie::launcher
