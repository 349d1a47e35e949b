// One-line log messages of the service processes, to stderr: "NAME: text".
// Thread-safe (one write per line).
#pragma once

#include <string_view>

namespace ernie::services {

void LogLine(std::string_view process_name, std::string_view message);

}  // namespace ernie::services
