// ParseHttpRequest (the gateway's HTTP reading over an in-memory buffer, the
// fuzz target's entry point): whole requests in both body framings, and the
// answers for requests cut short, too large or malformed. Includes the input
// the fuzzer found where the reader called Beast's parser again without new
// bytes (its chunked parser asserts that they come).
#include "gateway/http/request_reader.h"

#include <gtest/gtest.h>

#include <string>
#include <variant>

namespace ernie::gateway {
namespace {

constexpr size_t kHeaders = 2048, kBody = 4096;

HttpReadError ErrorOf(const std::string& bytes) {
  auto parsed = ParseHttpRequest(bytes, kHeaders, kBody);
  if (auto* error = std::get_if<HttpReadError>(&parsed)) return *error;
  ADD_FAILURE() << "accepted: " << bytes;
  return {};
}

TEST(RequestReaderTest, ContentLengthAndChunkedBodies) {
  auto a = ParseHttpRequest("POST /v1/completions?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 7\r\n\r\n{\"a\":1}",
                            kHeaders, kBody);
  ASSERT_TRUE(std::holds_alternative<HttpRequest>(a));
  EXPECT_EQ(std::get<HttpRequest>(a).path, "/v1/completions");
  EXPECT_EQ(std::get<HttpRequest>(a).body, "{\"a\":1}");
  auto b = ParseHttpRequest(
      "POST /v1/chat/completions HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n4\r\n\":1}\r\n0\r\n\r\n",
      kHeaders, kBody);
  ASSERT_TRUE(std::holds_alternative<HttpRequest>(b));
  EXPECT_EQ(std::get<HttpRequest>(b).body, "{\"a\":1}");
  // Bytes of a pipelined second request are left alone.
  auto c = ParseHttpRequest("GET /health HTTP/1.1\r\nHost: h\r\n\r\nGET /x HTTP/1.1\r\n", kHeaders, kBody);
  ASSERT_TRUE(std::holds_alternative<HttpRequest>(c));
  EXPECT_EQ(std::get<HttpRequest>(c).path, "/health");
}

TEST(RequestReaderTest, CutShortTooLargeAndMalformed) {
  EXPECT_EQ(ErrorOf("POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n{}").status, 400);
  EXPECT_EQ(ErrorOf("POST /v1/completions HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab").status,
            400);
  EXPECT_EQ(ErrorOf("").status, 400);
  EXPECT_EQ(ErrorOf("not http at all\r\n\r\n").status, 400);
  EXPECT_EQ(ErrorOf("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5000\r\n\r\n" + std::string(5000, 'x')).status,
            413);
  EXPECT_EQ(ErrorOf("GET / HTTP/1.1\r\nHost: h\r\nX-Big: " + std::string(3000, 'y') + "\r\n\r\n").status, 431);
}

TEST(RequestReaderTest, FinalChunkWithABareLineFeedIsRefusedNotAsserted) {
  // tests/fuzz/regressions/http_request_fuzzer/chunked_final_chunk_bare_lf:
  // the last chunk's size line ends in "\n" and the trailer never ends.
  const std::string bytes =
      "POST /v1/completions HTTP/1.1\r\noHst: hmin_toke\r\nTransfer-Encoding: chunked\r\n\r\n0\n\r\n";
  EXPECT_EQ(ErrorOf(bytes).status, 400);
}

}  // namespace
}  // namespace ernie::gateway
