// The demo model the tokenizer tests share: ctest's fixture
// tokenizer_demo_model writes it with ernie-make-model; a test binary run by
// hand writes it on first use.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"

namespace ernie::tokenizer::testing {

inline std::string DemoModelDir() {
  const std::string dir = ERNIE_TOKENIZER_TEST_MODEL_DIR;
  if (!std::filesystem::exists(std::filesystem::path(dir) / "tokenizer_config.json")) {
    const std::string command = absl::StrCat(ERNIE_BINARY_DIR, "/bin/ernie-make-model ", dir,
                                             " --shape demo --seed 1 > /dev/null");
    if (std::system(command.c_str()) != 0) return "";
  }
  return dir;
}

inline bool HavePythonSentencePiece() {
  return std::system("/usr/bin/python3 -c 'import sentencepiece' > /dev/null 2>&1") == 0;
}

// Runs tests/services/tokenizer/hf_reference.py with `args`; true on success.
inline bool RunReference(const std::string& args) {
  const std::string command =
      absl::StrCat("/usr/bin/python3 ", ERNIE_TOKENIZER_TEST_SOURCE_DIR, "/hf_reference.py ", args);
  return std::system(command.c_str()) == 0;
}

}  // namespace ernie::tokenizer::testing
