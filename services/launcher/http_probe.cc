#include "services/launcher/http_probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ernie::launcher {

int HttpGetStatus(const std::string& host, int port, const std::string& path, int timeout_ms) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const std::string ip = (host == "0.0.0.0" || host == "localhost") ? "127.0.0.1" : host;
  if (inet_pton(AF_INET, ip.c_str(), &addr.sin_addr) != 1 ||
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return 0;
  }
  const std::string req = absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: ", ip, "\r\nConnection: close\r\n\r\n");
  if (send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return 0;
  }
  std::string head;
  char buf[512];
  pollfd p{fd, POLLIN, 0};
  while (head.find("\r\n") == std::string::npos && poll(&p, 1, timeout_ms) > 0) {
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    head.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  // "HTTP/1.1 200 OK"
  int code = 0;
  if (head.size() > 12 && head.rfind("HTTP/1.", 0) == 0 && absl::SimpleAtoi(head.substr(9, 3), &code)) return code;
  return 0;
}

std::vector<int> PickFreePorts(int count) {
  // Every socket stays bound until all are chosen: the kernel cannot hand
  // the same port out twice (picking them one at a time, closing each, it
  // did, and two internal servers then raced for one port).
  std::vector<int> fds, ports;
  for (int i = 0; i < count; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) break;
    fds.push_back(fd);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      break;
    ports.push_back(ntohs(addr.sin_port));
  }
  for (const int fd : fds) close(fd);
  if (static_cast<int>(ports.size()) != count) ports.clear();
  return ports;
}

int PickFreePort() {
  const std::vector<int> ports = PickFreePorts(1);
  return ports.empty() ? 0 : ports[0];
}

}  // namespace ernie::launcher
