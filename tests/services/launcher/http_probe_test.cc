// PickFreePorts hands out distinct loopback ports that can be bound (the
// launcher's four internal servers once got the same port from one-at-a-time
// picks and raced for it).
#include "services/launcher/http_probe.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>

namespace ernie::launcher {
namespace {

TEST(PickFreePortsTest, GivesDistinctBindablePorts) {
  for (int round = 0; round < 50; ++round) {
    const std::vector<int> ports = PickFreePorts(4);
    ASSERT_EQ(ports.size(), 4u);
    EXPECT_EQ(std::set<int>(ports.begin(), ports.end()).size(), 4u) << "round " << round;
    for (const int port : ports) {
      ASSERT_GT(port, 0);
      const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(static_cast<uint16_t>(port));
      EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0) << "port " << port;
      close(fd);
    }
  }
  EXPECT_GT(PickFreePort(), 0);
}

}  // namespace
}  // namespace ernie::launcher
