// ernie-make-model: writes a random ERNIE-4.5 checkpoint in the exact
// Hugging Face layout of a real download (tests and demos use it; no real
// weights can be downloaded). Exit codes: 0 done, 2 usage error, 1 failure.
#include <cstdio>
#include <string>
#include <vector>

#include "tools/make_model/make_model.h"
#include "tools/make_model/make_model_options.h"

#ifndef ERNIE_MAKE_MODEL_CORPUS_DIR
#error "ERNIE_MAKE_MODEL_CORPUS_DIR must name tools/make_model/corpus"
#endif

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const auto options = ernie::make_model::ParseMakeModelArgs(args, ERNIE_MAKE_MODEL_CORPUS_DIR);
  if (!options.ok()) {
    std::fprintf(stderr, "ernie-make-model: %s\n%s\n", std::string(options.status().message()).c_str(),
                 ernie::make_model::kMakeModelUsage);
    return 2;
  }
  const absl::Status status = ernie::make_model::MakeModel(*options);
  if (!status.ok()) {
    std::fprintf(stderr, "ernie-make-model: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  std::printf("ernie-make-model: wrote %s (shape %s, seed %llu)\n", options->output_dir.c_str(),
              options->shape.name.c_str(), static_cast<unsigned long long>(options->seed));
  return 0;
}
