// For every checkpoint recorded by tools/reference/make_dense_reference.py,
// `ernie-generate` on the CPU backend reproduces Hugging Face's float32 greedy
// tokens and logprobs, whatever the prefill chunking and KV block size.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kMinSteps = 24;          // tokens that must agree (unless HF itself is near a tie)
constexpr double kLogprobTol = 2e-3;   // per-step logprob tolerance
constexpr double kTieGap = 1e-3;       // HF top-1/top-2 gap under which a divergence is acceptable

struct RunResult {
  int exit_code = -1;
  std::string out;
};

RunResult RunCommand(const std::string& cmd) {
  RunResult r;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen((cmd + " 2>&1").c_str(), "r"), pclose);
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe.get())) > 0) r.out.append(buf.data(), n);
  r.exit_code = WEXITSTATUS(pclose(pipe.release()));
  return r;
}

struct Layout {
  int prefill_chunk;
  int block_size;
};

class HfParityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HfParityTest, MatchesTransformersGreedy) {
  const std::string dir = std::string(ERNIE_TEST_DATA_DIR) + "/" + GetParam();
  std::ifstream in(dir + "/expected.json");
  ASSERT_TRUE(in) << dir;
  const json expected = json::parse(in);
  for (const Layout layout : {Layout{0, 16}, Layout{1, 1}, Layout{7, 64}, Layout{64, 16}, Layout{13, 1}}) {
    for (const auto& prompt : expected["prompts"]) {
      const auto& steps = prompt["steps"];
      const auto ids = prompt["prompt_ids"].get<std::vector<int>>();
      const std::string cmd = absl::StrCat(ERNIE_GENERATE_BIN, " --model ", dir, " --prompt-ids ", absl::StrJoin(ids, ","),
                                           " --max-tokens ", steps.size(), " --ignore-eos --top-logprobs 5",
                                           " --prefill-chunk ", layout.prefill_chunk, " --block-size ", layout.block_size);
      SCOPED_TRACE(absl::StrCat(GetParam(), " prompt_len=", ids.size(), " chunk=", layout.prefill_chunk,
                                " block=", layout.block_size));
      const RunResult run = RunCommand(cmd);
      ASSERT_EQ(run.exit_code, 0) << run.out;
      const json got = json::parse(run.out);
      const auto tokens = got["token_ids"].get<std::vector<int>>();
      const auto logprobs = got["logprobs"].get<std::vector<double>>();
      ASSERT_EQ(tokens.size(), steps.size());
      ASSERT_EQ(got["top_logprobs"].size(), steps.size());
      size_t agreed = 0;
      for (; agreed < steps.size(); ++agreed) {
        const auto& ref = steps[agreed];
        EXPECT_NEAR(logprobs[agreed], ref["logprob"].get<double>(), kLogprobTol) << "step " << agreed;
        if (tokens[agreed] != ref["token"].get<int>()) {
          // Only acceptable where HF's own choice was a near tie.
          EXPECT_LT(ref["gap12"].get<double>(), kTieGap)
              << "diverged at step " << agreed << ": got " << tokens[agreed] << ", HF " << ref["token"];
          break;
        }
        // The top-5 alternatives agree with HF's where they are not tied.
        const auto& top = got["top_logprobs"][agreed];
        ASSERT_EQ(top.size(), 5u);
        EXPECT_EQ(top[0][0].get<int>(), ref["top"][0][0].get<int>());
        for (size_t k = 0; k < 5; ++k)
          EXPECT_NEAR(top[k][1].get<double>(), ref["top"][k][1].get<double>(), kLogprobTol) << "step " << agreed;
      }
      if (agreed < static_cast<size_t>(kMinSteps)) {
        EXPECT_LT(steps[agreed]["gap12"].get<double>(), kTieGap) << "only " << agreed << " steps agreed";
      }
    }
  }
}

// "dense_reference/<case>" and "moe_reference/<case>" (tools/reference/make_*_reference.py).
std::vector<std::string> Cases() {
  std::vector<std::string> names;
  for (const char* set : {"dense_reference", "moe_reference"})
    for (const auto& entry : fs::directory_iterator(std::string(ERNIE_TEST_DATA_DIR) + "/" + set))
      if (fs::exists(entry.path() / "expected.json")) names.push_back(std::string(set) + "/" + entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, HfParityTest, ::testing::ValuesIn(Cases()), [](const auto& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), '/', '_');
  return name;
});

TEST(GenerateCliTest, BadInputsExitNonZeroWithAMessage) {
  const std::string bin = ERNIE_GENERATE_BIN;
  const std::string model = std::string(ERNIE_TEST_DATA_DIR) + "/dense_reference/gqa1_f32_tied_v97";
  struct Case {
    std::string args, expect;
    int code;
  };
  const Case cases[] = {
      {"--prompt-ids 1,2", "--model: is required", 2},
      {"--model " + model, "--prompt-ids: is required", 2},
      {"--model " + model + " --prompt-ids 1,x", "'x' is not an integer", 2},
      {"--model " + model + " --prompt-ids 1 --max-tokens 0", "--max-tokens", 2},
      {"--model " + model + " --prompt-ids 1 --frobnicate", "unknown option", 2},
      {"--model " + model + " --prompt-ids 1,97", "outside the vocabulary", 1},
      {"--model /nonexistent --prompt-ids 1", "/nonexistent", 1},
      {"--model " + model + " --prompt-ids 1 --top-logprobs 21", "--top-logprobs", 2},
  };
  for (const Case& c : cases) {
    const RunResult r = RunCommand(bin + " " + c.args);
    EXPECT_EQ(r.exit_code, c.code) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.args << "\n" << r.out;
  }
}

TEST(GenerateCliTest, SeededSamplingIsReproducibleAndLogitsDump) {
  const std::string model = std::string(ERNIE_TEST_DATA_DIR) + "/dense_reference/gqa2_bf16_untied_v1002";
  const std::string dump = (fs::temp_directory_path() / ("ernie_dump_" + std::to_string(::getpid()) + ".npy")).string();
  const std::string base = std::string(ERNIE_GENERATE_BIN) + " --model " + model + " --prompt-ids 5,6,7 --max-tokens 12 --ignore-eos --temperature 1.5";
  const RunResult a = RunCommand(base + " --seed 42 --dump-logits " + dump);
  const RunResult b = RunCommand(base + " --seed 42");
  const RunResult c = RunCommand(base + " --seed 43");
  ASSERT_EQ(a.exit_code, 0) << a.out;
  const auto ta = json::parse(a.out)["token_ids"], tb = json::parse(b.out)["token_ids"], tc = json::parse(c.out)["token_ids"];
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
  // .npy: 12 steps x 1002 float32 after the header.
  EXPECT_EQ(fs::file_size(dump) % 4, 0u);
  EXPECT_GE(fs::file_size(dump), 12u * 1002u * 4u);
  EXPECT_LT(fs::file_size(dump), 12u * 1002u * 4u + 256u);
  fs::remove(dump);
}

}  // namespace
