// The command line of ernie-make-model, parsed into an options struct.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/make_model/checkpoint_writer.h"
#include "tools/make_model/model_shape.h"
#include "tools/make_model/weight_dtype.h"

namespace ernie::make_model {

inline constexpr char kMakeModelUsage[] =
    "usage: ernie-make-model DIR --shape demo|0.3b|21b-a3b --seed S\n"
    "                        [--max-shard-bytes N] [--dtype bfloat16|float16|float32]\n"
    "                        [--corpus DIR] [--config-only] [--awq-group-size 32|64|128]\n"
    "                        [--num-layers N]\n"
    "Writes a random ERNIE-4.5 checkpoint in Hugging Face layout into DIR.\n"
    "--config-only writes everything but the safetensors (config, generation\n"
    "config, tokenizer): a directory to serve with --load-format dummy.\n"
    "--awq-group-size (with --config-only) adds an AWQ int4 quantization_config,\n"
    "so --load-format dummy makes int4 weights of that group size.\n"
    "--num-layers keeps the shape's first N layers (a smaller checkpoint of the\n"
    "same layer shapes, e.g. to time loading a 21b-a3b-shaped file set).";

struct MakeModelOptions {
  std::string output_dir;
  DenseShape shape;
  uint64_t seed = 0;
  WeightDtype dtype = WeightDtype::kBFloat16;
  uint64_t max_shard_bytes = kDefaultMaxShardBytes;
  std::string corpus_dir;  // defaults to the corpus of the source tree
  bool config_only = false;  // no weights: for --load-format dummy (shapes too large to write)
  int64_t awq_group_size = 0;  // > 0: config.json declares AWQ int4 of this group size (config_only only)
  int64_t num_layers = 0;      // > 0: only the shape's first num_layers layers (at most the shape's count)
};

// Parses argv[1..]. Both "--flag value" and "--flag=value" are accepted.
// InvalidArgument (a usage error) names the flag or value at fault;
// Unimplemented for a known but not yet available shape.
absl::StatusOr<MakeModelOptions> ParseMakeModelArgs(const std::vector<std::string>& args,
                                                    const std::string& default_corpus_dir);

}  // namespace ernie::make_model
