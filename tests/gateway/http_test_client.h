// A tiny blocking HTTP/1.1 client over a raw socket for the gateway tests:
// keep-alive, Content-Length and chunked bodies, and reading a stream
// event by event so a test can hang up in the middle.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <map>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/gateway/fake_services_order.h"

namespace ernie::gateway::testing {

struct ClientResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lowercase names
  std::string body;                            // de-chunked
};

class HttpTestClient {
 public:
  explicit HttpTestClient(uint16_t port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  }
  ~HttpTestClient() { Close(); }

  bool connected() const { return connected_; }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

  bool SendRaw(const std::string& bytes) {
    HandToGrpc(&kFakeServicesOrder);
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  bool SendRequest(const std::string& method, const std::string& path, const std::string& body = "",
                   const std::string& extra_headers = "") {
    std::string request = absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: localhost\r\n", extra_headers);
    if (!body.empty() || method == "POST") {
      absl::StrAppend(&request, "Content-Type: application/json\r\nContent-Length: ", body.size(), "\r\n");
    }
    absl::StrAppend(&request, "\r\n", body);
    return SendRaw(request);
  }

  // Reads the status line and headers.
  bool ReadHead(ClientResponse* response) {
    std::string line;
    if (!ReadLine(&line)) return false;
    if (line.size() < 12) return false;
    if (!absl::SimpleAtoi(line.substr(9, 3), &response->status)) return false;
    while (ReadLine(&line) && !line.empty()) {
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      std::string value = line.substr(colon + 1);
      absl::StripAsciiWhitespace(&value);
      response->headers[absl::AsciiStrToLower(line.substr(0, colon))] = value;
    }
    return true;
  }

  // Reads one chunk of a chunked body; false at the last chunk or on error.
  bool ReadChunk(std::string* data) {
    std::string size_line;
    if (!ReadLine(&size_line)) return false;
    size_t size = 0;
    if (!absl::SimpleHexAtoi(size_line, &size)) return false;
    if (size == 0) {
      std::string trailer;
      ReadLine(&trailer);
      return false;
    }
    if (!ReadExactly(size, data)) return false;
    std::string crlf;
    return ReadLine(&crlf);
  }

  // A whole response.
  bool ReadResponse(ClientResponse* response) {
    if (!ReadHead(response)) return false;
    if (response->headers["transfer-encoding"] == "chunked") {
      std::string chunk;
      while (ReadChunk(&chunk)) {
        response->body += chunk;
        chunk.clear();
      }
      return true;
    }
    size_t length = 0;
    if (!absl::SimpleAtoi(response->headers["content-length"], &length)) return response->status == 100;
    return ReadExactly(length, &response->body);
  }

  ClientResponse Fetch(const std::string& method, const std::string& path, const std::string& body = "",
                       const std::string& extra_headers = "") {
    ClientResponse response;
    if (!SendRequest(method, path, body, extra_headers)) return response;
    ReadResponse(&response);
    return response;
  }

  // Whether the server closed the connection (waits up to `ms`).
  bool ClosedByPeer(int ms) {
    if (!buffer_.empty()) return false;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, ms) <= 0) return false;
    char byte;
    return recv(fd_, &byte, 1, MSG_PEEK) == 0;
  }

 private:
  bool Fill() {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 10'000) <= 0) return false;  // tests never wait this long when all is well
    char chunk[4096];
    const ssize_t n = recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    TakeFromGrpc(&kFakeServicesOrder);
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }
  bool ReadLine(std::string* line) {
    size_t end;
    while ((end = buffer_.find("\r\n")) == std::string::npos) {
      if (!Fill()) return false;
    }
    *line = buffer_.substr(0, end);
    buffer_.erase(0, end + 2);
    return true;
  }
  bool ReadExactly(size_t size, std::string* out) {
    while (buffer_.size() < size) {
      if (!Fill()) return false;
    }
    out->append(buffer_, 0, size);
    buffer_.erase(0, size);
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  std::string buffer_;  // received, not yet consumed
};

}  // namespace ernie::gateway::testing
