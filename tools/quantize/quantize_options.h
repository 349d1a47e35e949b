// Command line of ernie-quantize:
//   ernie-quantize IN OUT [--method awq|rtn] [--group-size 32|64|128]
//                  [--calib FILE] [--calib-tokens N] [--alpha-grid N] [--threads N]
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ernie::quantize {

enum class QuantMethod { kAwq, kRtn };

struct QuantizeOptions {
  std::string input_dir;             // a float ERNIE-4.5 checkpoint (Hugging Face layout)
  std::string output_dir;            // created; must not hold a checkpoint already
  QuantMethod method = QuantMethod::kAwq;
  int64_t group_size = 128;          // inputs per scale / zero point: 32, 64 or 128
  std::string calib_file;            // calibration text (AWQ); the default ships in the repo
  int64_t calib_tokens = 512;        // calibration tokens run through the model
  int alpha_grid = 20;               // alphas tried: 0, 1/N, ..., (N-1)/N (AutoAWQ's grid)
  int threads = 0;                   // 0: one per hardware thread
};

inline constexpr const char* kQuantizeUsage =
    "usage: ernie-quantize IN OUT [--method awq|rtn] [--group-size 32|64|128] [--calib FILE]\n"
    "                      [--calib-tokens N] [--alpha-grid N] [--threads N]\n"
    "  Writes OUT: IN's linears as AutoAWQ \"gemm\" 4-bit weights (group-wise, asymmetric, zero points).\n"
    "  rtn: round to nearest per group; awq: activation-aware scales from calibration text (default).";

// Parses argv[1..]; InvalidArgument names the bad option and why. `default_calib`
// is the repository's calibration text.
absl::StatusOr<QuantizeOptions> ParseQuantizeArgs(const std::vector<std::string>& args,
                                                  const std::string& default_calib);

}  // namespace ernie::quantize
