// ernie-tokenize: the JSON it prints for --text, --ids and --messages, and
// its exit codes on bad input (the real binary, run through the shell).
#include "services/tokenizer/tokenize_cli.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "tests/services/tokenizer/demo_model.h"

namespace ernie::tokenizer {
namespace {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

CommandResult RunCli(const std::string& args) {
  const std::string command =
      std::string(ERNIE_TOKENIZE_BINARY) + " --model " + testing::DemoModelDir() + " " + args + " 2>&1";
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

nlohmann::json ParseOutput(const CommandResult& result) {
  EXPECT_EQ(result.exit_code, 0) << result.output;
  return nlohmann::json::parse(result.output, nullptr, false);
}

TEST(TokenizeCliTest, TextWithSpecialTokens) {
  const nlohmann::json out = ParseOutput(RunCli("--text 'Hi<|end_of_sentence|>' --parse-special"));
  ASSERT_TRUE(out.is_object()) << out;
  EXPECT_EQ(out["ids"].back(), 100272);
  EXPECT_EQ(out["pieces"].back(), "<|end_of_sentence|>");
  EXPECT_EQ(out["text"], "Hi<|end_of_sentence|>");
  EXPECT_EQ(out["ids"].size(), out["pieces"].size());
}

TEST(TokenizeCliTest, IdsDecodeWithAndWithoutSpecials) {
  const nlohmann::json out = ParseOutput(RunCli("--ids 100273,16,17,18,100272 --skip-special"));
  EXPECT_EQ(out["text"], "\x03\x04\x05");  // byte pieces <0x03>.. decode to raw control bytes
  EXPECT_EQ(out["pieces"][0], "<|begin_of_sentence|>");
  EXPECT_EQ(out["pieces"][1], "<0x03>");
}

TEST(TokenizeCliTest, MessagesRenderExactlyAsTheTemplate) {
  const std::string messages = R"('[{"role":"system","content":"Sys."},{"role":"user","content":"Hi"}]')";
  const nlohmann::json rendered = ParseOutput(RunCli("--messages " + messages + " --render"));
  EXPECT_EQ(rendered["text"], "<|begin_of_sentence|>Sys.\nUser: Hi\nAssistant: ");
  EXPECT_EQ(rendered["ids"][0], 100273);
  const nlohmann::json no_prompt = ParseOutput(RunCli("--messages " + messages + " --render --no-generation-prompt"));
  EXPECT_EQ(no_prompt["text"], "<|begin_of_sentence|>Sys.\nUser: Hi\n");
}

TEST(TokenizeCliTest, ErrorsExitNonZeroWithTheMessage) {
  CommandResult bad_id = RunCli("--ids 5,999999");
  EXPECT_NE(bad_id.exit_code, 0);
  EXPECT_NE(bad_id.output.find("999999"), std::string::npos) << bad_id.output;
  CommandResult not_an_id = RunCli("--ids 5,x");
  EXPECT_NE(not_an_id.exit_code, 0);
  EXPECT_NE(not_an_id.output.find("'x' is not a token id"), std::string::npos) << not_an_id.output;
  CommandResult two_inputs = RunCli("--text a --ids 1");
  EXPECT_NE(two_inputs.exit_code, 0);
  EXPECT_NE(two_inputs.output.find("exactly one"), std::string::npos) << two_inputs.output;
  CommandResult bad_json = RunCli("--messages '[{'");
  EXPECT_NE(bad_json.exit_code, 0);
  EXPECT_NE(bad_json.output.find("--messages"), std::string::npos) << bad_json.output;
}

TEST(TokenizeCliTest, ParseIdList) {
  EXPECT_EQ(*ParseIdList("1, 2,3"), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_FALSE(ParseIdList("1,,two").ok());
}

}  // namespace
}  // namespace ernie::tokenizer
