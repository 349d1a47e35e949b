#include "services/common/metrics/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/util/status_macros.h"

namespace ernie::metrics {
namespace {

absl::StatusOr<std::string> ReadFile(const char* path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<int64_t> BootTimeSeconds() {
  ERNIE_ASSIGN_OR_RETURN(std::string stat, ReadFile("/proc/stat"));
  for (absl::string_view line : absl::StrSplit(stat, '\n')) {
    if (line.substr(0, 6) != "btime ") continue;
    int64_t btime = 0;
    if (absl::SimpleAtoi(line.substr(6), &btime)) return btime;
  }
  return absl::InternalError("/proc/stat has no btime line");
}

int64_t CountOpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  int64_t count = 0;
  while (const dirent* entry = readdir(dir))
    if (entry->d_name[0] != '.') ++count;
  closedir(dir);
  return count - 1;  // the directory stream's own descriptor
}

}  // namespace

absl::StatusOr<ProcessStats> ReadProcessStats() {
  ERNIE_ASSIGN_OR_RETURN(std::string stat, ReadFile("/proc/self/stat"));
  // The command name (field 2) is in parentheses and may hold spaces: split after its ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return absl::InternalError("/proc/self/stat has no ')'");
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(close + 2), ' ', absl::SkipEmpty());
  // fields[0] is field 3 (state): field k of proc(5) is fields[k - 3].
  if (fields.size() < 22) return absl::InternalError("/proc/self/stat has too few fields");
  auto field = [&](int k) {
    int64_t v = 0;
    (void)absl::SimpleAtoi(fields[static_cast<size_t>(k - 3)], &v);
    return v;
  };
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  ProcessStats stats;
  stats.cpu_seconds = static_cast<double>(field(14) + field(15)) / ticks;
  stats.virtual_bytes = field(23);
  stats.resident_bytes = field(24) * sysconf(_SC_PAGESIZE);
  ERNIE_ASSIGN_OR_RETURN(int64_t boot, BootTimeSeconds());
  stats.start_time_seconds = static_cast<double>(boot) + static_cast<double>(field(22)) / ticks;
  stats.open_fds = CountOpenFds();
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) stats.max_fds = static_cast<int64_t>(limit.rlim_cur);
  return stats;
}

absl::Status RegisterProcessMetrics(Registry& registry) {
  ERNIE_ASSIGN_OR_RETURN(ProcessStats at_start, ReadProcessStats());
  const double start_time = at_start.start_time_seconds;
  // Each callback reads /proc anew: a scrape costs a few small reads.
  auto read = [](auto member) {
    return [member]() -> double {
      auto stats = ReadProcessStats();
      return stats.ok() ? static_cast<double>((*stats).*member) : 0.0;
    };
  };
  ERNIE_ASSIGN_OR_RETURN(auto* cpu, registry.AddCounter("process_cpu_seconds_total",
                                                        "Total user and system CPU time spent in seconds."));
  cpu->AddCallback({}, read(&ProcessStats::cpu_seconds));
  ERNIE_ASSIGN_OR_RETURN(auto* rss, registry.AddGauge("process_resident_memory_bytes", "Resident memory size in bytes."));
  rss->AddCallback({}, read(&ProcessStats::resident_bytes));
  ERNIE_ASSIGN_OR_RETURN(auto* vms, registry.AddGauge("process_virtual_memory_bytes", "Virtual memory size in bytes."));
  vms->AddCallback({}, read(&ProcessStats::virtual_bytes));
  ERNIE_ASSIGN_OR_RETURN(auto* start, registry.AddGauge("process_start_time_seconds",
                                                        "Start time of the process since unix epoch in seconds."));
  start->AddCallback({}, [start_time] { return start_time; });
  ERNIE_ASSIGN_OR_RETURN(auto* fds, registry.AddGauge("process_open_fds", "Number of open file descriptors."));
  fds->AddCallback({}, read(&ProcessStats::open_fds));
  ERNIE_ASSIGN_OR_RETURN(auto* max_fds, registry.AddGauge("process_max_fds", "Maximum number of open file descriptors."));
  max_fds->AddCallback({}, read(&ProcessStats::max_fds));
  return absl::OkStatus();
}

}  // namespace ernie::metrics
