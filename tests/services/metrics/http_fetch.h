// A blocking HTTP/1.0 GET over loopback for tests: returns the status line
// and the body, or an error naming what failed.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace ernie::metrics::testing {

struct HttpAnswer {
  int status = 0;
  std::string headers;
  std::string body;
};

inline absl::StatusOr<HttpAnswer> HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket() failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to 127.0.0.1:", port));
  }
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::InternalError("short write");
  }
  std::string raw;
  char buffer[8192];
  ssize_t n = 0;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) raw.append(buffer, static_cast<size_t>(n));
  close(fd);
  const size_t head_end = raw.find("\r\n\r\n");
  if (raw.size() < 12 || head_end == std::string::npos)
    return absl::InternalError(absl::StrCat("malformed answer: '", raw.substr(0, 80), "'"));
  HttpAnswer answer;
  answer.status = std::stoi(raw.substr(9, 3));
  answer.headers = raw.substr(0, head_end);
  answer.body = raw.substr(head_end + 4);
  return answer;
}

}  // namespace ernie::metrics::testing
