#include "services/common/service_log.h"

#include <unistd.h>

#include <string>

namespace ernie::services {

void LogLine(std::string_view process_name, std::string_view message) {
  std::string line;
  line.reserve(process_name.size() + message.size() + 3);
  line.append(process_name).append(": ").append(message).push_back('\n');
  // One write(2) so lines from several threads never interleave.
  const ssize_t written = ::write(STDERR_FILENO, line.data(), line.size());
  (void)written;
}

}  // namespace ernie::services
