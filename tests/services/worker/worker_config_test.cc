#include "services/worker/worker_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace ernie::worker {
namespace {

TEST(WorkerConfigTest, FlagsOverrideYaml) {
  const auto path = std::filesystem::temp_directory_path() / ("ernie_worker_cfg_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << "model: /m\nport: 7000\nblock_size: 32\nenable_prefix_caching: false\n";
  auto c = ParseWorkerFlags({"--port", "7001", "--config", path.string(), "--max-num-seqs=8"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model, "/m");
  EXPECT_EQ(c->port, 7001);
  EXPECT_EQ(c->block_size, 32);
  EXPECT_EQ(c->max_num_seqs, 8);
  EXPECT_FALSE(c->enable_prefix_caching);
  std::filesystem::remove(path);
}

TEST(WorkerConfigTest, AsyncSchedulingIsOnByDefault) {
  auto c = ParseWorkerFlags({"--model", "m"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->async_scheduling);  // on by default
  c = ParseWorkerFlags({"--model", "m", "--no-async-scheduling"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->async_scheduling);
  c = ParseWorkerFlags({"--model", "m", "--async-scheduling"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->async_scheduling);
  c = ParseWorkerFlags({"--model", "m", "--async-scheduling", "--no-async-scheduling"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->async_scheduling);
  c = ParseWorkerFlags({"--model", "m", "--async-scheduling=maybe"});
  EXPECT_FALSE(c.ok());
}

TEST(WorkerConfigTest, LmHeadTuningIsOnByDefaultAndTurnsOff) {
  auto c = ParseWorkerFlags({"--model", "m"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->lm_head_tuning);
  c = ParseWorkerFlags({"--model", "m", "--no-lm-head-tuning"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->lm_head_tuning);
  c = ParseWorkerFlags({"--model", "m", "--no-lm-head-tuning", "--lm-head-tuning"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->lm_head_tuning);
  c = ParseWorkerFlags({"--model", "m", "--lm-head-tuning=false"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->lm_head_tuning);
  c = ParseWorkerFlags({"--model", "m", "--lm-head-tuning=often"});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("--lm-head-tuning"), std::string::npos) << c.status();
  // The other --no- forms still name their own settings.
  c = ParseWorkerFlags({"--model", "m", "--no-enable-prefix-caching", "--no-async-scheduling"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->enable_prefix_caching);
  EXPECT_FALSE(c->async_scheduling);
  EXPECT_TRUE(c->lm_head_tuning);
}

TEST(WorkerConfigTest, ExampleFileInDeployParses) {
  WorkerConfig c;
  ASSERT_TRUE(ApplyYamlFile(std::string(ERNIE_TEST_DATA_DIR) + "/../../deploy/worker.example.yaml", &c).ok());
  EXPECT_EQ(c.block_size, 16);
  EXPECT_EQ(c.host, "127.0.0.1");
}

TEST(WorkerConfigTest, ErrorsNameTheSetting) {
  auto c = ParseWorkerFlags({"--model", "m", "--blok-size", "3"});
  EXPECT_NE(std::string(c.status().message()).find("--blok-size: unknown setting"), std::string::npos);
  c = ParseWorkerFlags({"--model", "m", "--block-size", "zero"});
  EXPECT_NE(std::string(c.status().message()).find("--block-size: 'zero' is not an integer"), std::string::npos);
  c = ParseWorkerFlags({"--model", "m", "--backend", "tpu"});
  EXPECT_NE(std::string(c.status().message()).find("--backend"), std::string::npos);
  c = ParseWorkerFlags({"--model", "m", "--load-format", "pt"});
  EXPECT_NE(std::string(c.status().message()).find("--load-format: 'pt' is not auto, safetensors or dummy"),
            std::string::npos);
  c = ParseWorkerFlags({"--model", "m", "--load-format", "dummy"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->load_format, "dummy");
  c = ParseWorkerFlags({"--port", "1"});
  EXPECT_NE(std::string(c.status().message()).find("--model: is required"), std::string::npos);
  const auto path = std::filesystem::temp_directory_path() / ("ernie_worker_bad_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << "model: m\nportt: 3\n";
  c = ParseWorkerFlags({"--config", path.string()});
  EXPECT_NE(std::string(c.status().message()).find("portt: unknown setting"), std::string::npos);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace ernie::worker
