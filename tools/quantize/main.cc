// ernie-quantize: writes an AutoAWQ "gemm" 4-bit checkpoint from a float
// ERNIE-4.5 checkpoint (quantize_model.h). Exit codes: 0 done, 2 usage
// error, 1 failure.
#include <cstdio>
#include <string>
#include <vector>

#include "tools/quantize/quantize_model.h"
#include "tools/quantize/quantize_options.h"

#ifndef ERNIE_QUANTIZE_CALIB_FILE
#error "ERNIE_QUANTIZE_CALIB_FILE must name the calibration text in the source tree"
#endif

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& a : args)
    if (a == "--help" || a == "-h") {
      std::printf("%s\n", ernie::quantize::kQuantizeUsage);
      return 0;
    }
  const auto options = ernie::quantize::ParseQuantizeArgs(args, ERNIE_QUANTIZE_CALIB_FILE);
  if (!options.ok()) {
    std::fprintf(stderr, "ernie-quantize: %s\n%s\n", std::string(options.status().message()).c_str(),
                 ernie::quantize::kQuantizeUsage);
    return 2;
  }
  const absl::Status status = ernie::quantize::QuantizeModel(*options);
  if (!status.ok()) {
    std::fprintf(stderr, "ernie-quantize: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
