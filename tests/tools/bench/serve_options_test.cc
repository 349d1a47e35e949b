// ernie-bench serve's options: the client's thread count, chosen so the
// client is not what limits a many-stream run (NOTES.md v27: one thread
// doubled the measured TTFT p50 at 256 streams), and bad values refused.
#include "tools/bench/serve/serve_options.h"

#include <gtest/gtest.h>

namespace ernie::bench {
namespace {

TEST(ClientThreadsTest, DefaultIsHalfTheCoresAtMostFour) {
  EXPECT_EQ(ClientThreads(0, 256, 16), 4);
  EXPECT_EQ(ClientThreads(0, 256, 6), 3);
  EXPECT_EQ(ClientThreads(0, 256, 2), 1);  // a two-core machine keeps one
  EXPECT_EQ(ClientThreads(0, 256, 1), 1);
  EXPECT_EQ(ClientThreads(0, 256, 0), 1);  // hardware_concurrency() may not know
  EXPECT_EQ(ClientThreads(0, 2, 16), 2);   // never more threads than connections
}

TEST(ClientThreadsTest, AnExplicitCountIsKeptUpToTheConnections) {
  EXPECT_EQ(ClientThreads(1, 256, 16), 1);
  EXPECT_EQ(ClientThreads(8, 256, 2), 8);
  EXPECT_EQ(ClientThreads(8, 3, 16), 3);
}

TEST(ServeOptionsTest, ThreadsMustBePositive) {
  const auto parsed = ParseServeOptions({"--base-url", "http://x:1", "--model", "m", "--concurrency", "4",
                                         "--num-prompts", "8", "--input-len", "4", "--output-len", "4",
                                         "--threads", "0"});
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("--threads: '0' is not an integer >= 1"), std::string::npos)
      << parsed.status();
  const auto defaulted = ParseServeOptions({"--base-url", "http://x:1", "--model", "m", "--concurrency", "4",
                                            "--num-prompts", "8", "--input-len", "4", "--output-len", "4"});
  ASSERT_TRUE(defaulted.ok()) << defaulted.status();
  EXPECT_EQ(defaulted->threads, 0);  // ClientThreads decides
}

}  // namespace
}  // namespace ernie::bench
