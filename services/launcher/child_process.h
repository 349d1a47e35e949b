// A child process the launcher starts, watches and stops. Its stdout and
// stderr pass straight through to the launcher's (each server prefixes its
// own lines with its name).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ernie::launcher {

class ChildProcess {
 public:
  ChildProcess(std::string name, std::string binary, std::vector<std::string> args)
      : name_(std::move(name)), binary_(std::move(binary)), args_(std::move(args)) {}

  // fork + exec. The child gets its own process group so a terminal's ^C
  // reaches the launcher only, which then stops children in order.
  absl::Status Start();
  // SIGTERM, then SIGKILL after `grace_ms`; reaps the child.
  void Stop(int grace_ms);
  // Non-blocking: true (and the exit code) when the child has exited.
  bool Exited(int* status);

  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  const std::string& name() const { return name_; }
  std::string CommandLine() const;

 private:
  std::string name_;
  std::string binary_;
  std::vector<std::string> args_;
  pid_t pid_ = -1;
};

}  // namespace ernie::launcher
