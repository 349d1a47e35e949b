// Helpers of the tests that start the whole stack (ernie-serve and its three
// servers) as child processes: a shell command's output, a file's text, and
// a poll until a condition holds.
#pragma once

#include <sys/wait.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

namespace ernie::testing {

// `cmd`'s stdout and stderr; its exit code into *code when given.
inline std::string Shell(const std::string& cmd, int* code = nullptr) {
  std::string out;
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen((cmd + " 2>&1").c_str(), "r"), pclose);
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe.get())) > 0) out.append(buf.data(), n);
  const int status = pclose(pipe.release());
  if (code) *code = WEXITSTATUS(status);
  return out;
}

// The file's whole text ("" when it cannot be read).
inline std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Polls `ready` every `poll` until it holds (true) or `seconds` pass (false).
inline bool WaitFor(const std::function<bool()>& ready, int seconds,
                    std::chrono::milliseconds poll = std::chrono::milliseconds(100)) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (ready()) return true;
    std::this_thread::sleep_for(poll);
  }
  return false;
}

}  // namespace ernie::testing
