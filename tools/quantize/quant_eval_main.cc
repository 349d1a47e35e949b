// ernie-quant-eval REFERENCE_DIR QUANTIZED_DIR [--text FILE] [--tokens N] [--threads N]:
// prints one JSON line with the KL divergence of the quantized model's
// next-token distributions from the reference's on held-out text
// (quant_eval.h). Exit codes: 0 done, 2 usage error, 1 failure.
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "tools/quantize/model_runner.h"
#include "tools/quantize/quant_eval.h"

#ifndef ERNIE_QUANT_EVAL_TEXT_FILE
#error "ERNIE_QUANT_EVAL_TEXT_FILE must name the held-out text in the source tree"
#endif

namespace {
constexpr const char* kUsage =
    "usage: ernie-quant-eval REFERENCE_DIR QUANTIZED_DIR [--text FILE] [--tokens N] [--threads N]";
}

int main(int argc, char** argv) {
  std::string dirs[2], text_file = ERNIE_QUANT_EVAL_TEXT_FILE;
  int positional = 0, threads = 0;
  int64_t tokens = 512;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--text" && has_value) {
      text_file = argv[++i];
    } else if (a == "--tokens" && has_value) {
      if (!absl::SimpleAtoi(argv[++i], &tokens) || tokens <= 0) {
        std::fprintf(stderr, "ernie-quant-eval: --tokens wants a positive integer\n%s\n", kUsage);
        return 2;
      }
    } else if (a == "--threads" && has_value) {
      if (!absl::SimpleAtoi(argv[++i], &threads) || threads < 0) {
        std::fprintf(stderr, "ernie-quant-eval: --threads wants a non-negative integer\n%s\n", kUsage);
        return 2;
      }
    } else if (a.rfind("--", 0) == 0 || positional == 2) {
      std::fprintf(stderr, "ernie-quant-eval: unexpected argument '%s'\n%s\n", a.c_str(), kUsage);
      return 2;
    } else {
      dirs[positional++] = a;
    }
  }
  if (positional != 2) {
    std::fprintf(stderr, "ernie-quant-eval: expected REFERENCE_DIR and QUANTIZED_DIR\n%s\n", kUsage);
    return 2;
  }
  auto text = ernie::quantize::ReadTextFile(text_file);
  if (!text.ok()) {
    std::fprintf(stderr, "ernie-quant-eval: %s\n", std::string(text.status().message()).c_str());
    return 1;
  }
  auto result = ernie::quantize::CompareWithReference(dirs[0], dirs[1], *text, tokens, threads);
  if (!result.ok()) {
    std::fprintf(stderr, "ernie-quant-eval: %s\n", std::string(result.status().message()).c_str());
    return 1;
  }
  std::printf("%s\n", ernie::quantize::QuantEvalJson(*result).c_str());
  return 0;
}
