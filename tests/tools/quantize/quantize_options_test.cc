// ernie-quantize's command line: defaults, spellings and one error per bad option.
#include "tools/quantize/quantize_options.h"

#include <gtest/gtest.h>

namespace ernie::quantize {
namespace {

std::string ErrorOf(const std::vector<std::string>& args) {
  auto o = ParseQuantizeArgs(args, "default.txt");
  return o.ok() ? "" : std::string(o.status().message());
}

TEST(QuantizeOptionsTest, Defaults) {
  auto o = ParseQuantizeArgs({"in", "out"}, "default.txt");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->method, QuantMethod::kAwq);
  EXPECT_EQ(o->group_size, 128);
  EXPECT_EQ(o->calib_file, "default.txt");
  EXPECT_EQ(o->calib_tokens, 512);
  EXPECT_EQ(o->alpha_grid, 20);
}

TEST(QuantizeOptionsTest, ReadsEveryOption) {
  auto o = ParseQuantizeArgs({"--method", "rtn", "in", "--group-size=32", "out", "--threads", "3"}, "d");
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->method, QuantMethod::kRtn);
  EXPECT_EQ(o->group_size, 32);
  EXPECT_EQ(o->threads, 3);
  auto a = ParseQuantizeArgs({"in", "out", "--calib", "c.txt", "--calib-tokens", "77", "--alpha-grid", "5"}, "d");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->calib_file, "c.txt");
  EXPECT_EQ(a->calib_tokens, 77);
  EXPECT_EQ(a->alpha_grid, 5);
}

TEST(QuantizeOptionsTest, ErrorsNameTheOption) {
  EXPECT_NE(ErrorOf({"in"}).find("expected IN and OUT"), std::string::npos);
  EXPECT_NE(ErrorOf({"in", "out", "--method", "gptq"}).find("--method must be awq or rtn"), std::string::npos);
  EXPECT_NE(ErrorOf({"in", "out", "--group-size", "100"}).find("--group-size must be one of 32, 64, 128"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"in", "out", "--calib-tokens", "x"}).find("--calib-tokens wants an integer"), std::string::npos);
  EXPECT_NE(ErrorOf({"in", "out", "--alpha-grid", "0"}).find("--alpha-grid must be in [1, 1000]"), std::string::npos);
  EXPECT_NE(ErrorOf({"in", "out", "--bits", "3"}).find("unknown option --bits"), std::string::npos);
  EXPECT_NE(ErrorOf({"in", "out", "--calib"}).find("--calib needs a value"), std::string::npos);
  EXPECT_NE(ErrorOf({"in", "out", "--method", "rtn", "--calib", "c"}).find("--calib is for --method awq"),
            std::string::npos);
  EXPECT_NE(ErrorOf({"same", "same"}).find("different"), std::string::npos);
}

}  // namespace
}  // namespace ernie::quantize
