#include "services/launcher/child_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ernie::launcher {

absl::Status ChildProcess::Start() {
  std::vector<char*> argv;
  argv.push_back(binary_.data());
  for (auto& a : args_) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork for ", name_, ": ", std::strerror(errno)));
  if (pid == 0) {
    setpgid(0, 0);
    // The launcher blocks these for sigwait; the servers need them back.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(binary_.c_str(), argv.data());
    const std::string msg = absl::StrCat("ernie-serve: cannot run ", binary_, ": ", std::strerror(errno), "\n");
    (void)!write(2, msg.data(), msg.size());
    _exit(127);
  }
  pid_ = pid;
  return absl::OkStatus();
}

bool ChildProcess::Exited(int* status) {
  if (pid_ <= 0) return true;
  int st = 0;
  const pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == 0) return false;
  pid_ = -1;
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return true;
}

void ChildProcess::Stop(int grace_ms) {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  int st;
  while (std::chrono::steady_clock::now() < deadline) {
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, &st, 0);
  pid_ = -1;
}

std::string ChildProcess::CommandLine() const { return absl::StrCat(binary_, " ", absl::StrJoin(args_, " ")); }

}  // namespace ernie::launcher
