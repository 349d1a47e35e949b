#include "tools/make_model/make_model_options.h"

#include <algorithm>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "engine/model/awq_format.h"
#include "engine/util/status_macros.h"

namespace ernie::make_model {
namespace {

absl::StatusOr<uint64_t> ParseUnsigned(const std::string& flag, const std::string& value) {
  uint64_t out = 0;
  if (value.empty() || value[0] == '-' || !absl::SimpleAtoi(value, &out)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " needs a non-negative integer, got '", value, "'"));
  }
  return out;
}

}  // namespace

absl::StatusOr<MakeModelOptions> ParseMakeModelArgs(const std::vector<std::string>& args,
                                                    const std::string& default_corpus_dir) {
  MakeModelOptions options;
  options.corpus_dir = default_corpus_dir;
  std::optional<std::string> shape_name;
  bool have_seed = false;

  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg.rfind("--", 0) != 0) {
      if (!options.output_dir.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("unexpected extra argument '", arg,
                                                       "' (the output DIR is already '",
                                                       options.output_dir, "')"));
      }
      options.output_dir = arg;
      continue;
    }
    std::string value;
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (arg != "--help" && arg != "--config-only") {
      if (i + 1 >= args.size()) return absl::InvalidArgumentError(absl::StrCat(arg, " needs a value"));
      value = args[++i];
    }
    if (arg == "--help") {
      return absl::InvalidArgumentError("help requested");
    } else if (arg == "--config-only") {
      if (eq != std::string::npos) return absl::InvalidArgumentError("--config-only takes no value");
      options.config_only = true;
    } else if (arg == "--shape") {
      shape_name = value;
    } else if (arg == "--seed") {
      ERNIE_ASSIGN_OR_RETURN(options.seed, ParseUnsigned("--seed", value));
      have_seed = true;
    } else if (arg == "--max-shard-bytes") {
      ERNIE_ASSIGN_OR_RETURN(options.max_shard_bytes, ParseUnsigned("--max-shard-bytes", value));
      if (options.max_shard_bytes == 0) return absl::InvalidArgumentError("--max-shard-bytes must be positive");
    } else if (arg == "--dtype") {
      ERNIE_ASSIGN_OR_RETURN(options.dtype, WeightDtypeByName(value));
    } else if (arg == "--awq-group-size") {
      ERNIE_ASSIGN_OR_RETURN(const uint64_t group, ParseUnsigned("--awq-group-size", value));
      if (std::find(kAwqGroupSizes.begin(), kAwqGroupSizes.end(), static_cast<int64_t>(group)) == kAwqGroupSizes.end())
        return absl::InvalidArgumentError(absl::StrCat("--awq-group-size must be 32, 64 or 128, got ", value));
      options.awq_group_size = static_cast<int64_t>(group);
    } else if (arg == "--num-layers") {
      ERNIE_ASSIGN_OR_RETURN(const uint64_t layers, ParseUnsigned("--num-layers", value));
      if (layers == 0) return absl::InvalidArgumentError("--num-layers must be positive");
      options.num_layers = static_cast<int64_t>(layers);
    } else if (arg == "--corpus") {
      if (value.empty()) return absl::InvalidArgumentError("--corpus needs a folder");
      options.corpus_dir = value;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag '", arg, "'"));
    }
  }
  if (options.output_dir.empty()) return absl::InvalidArgumentError("missing the output DIR");
  if (!shape_name) return absl::InvalidArgumentError("missing --shape");
  if (!have_seed) return absl::InvalidArgumentError("missing --seed");
  // Random int4 weights belong to the device (--load-format dummy); a
  // checkpoint with weights is quantized from a float one by ernie-quantize.
  if (options.awq_group_size > 0 && !options.config_only)
    return absl::InvalidArgumentError(
        "--awq-group-size needs --config-only (to quantize a checkpoint's weights, use ernie-quantize)");
  ERNIE_ASSIGN_OR_RETURN(options.shape, ShapeByName(*shape_name));
  if (options.num_layers > 0) {
    if (options.num_layers > options.shape.num_hidden_layers)
      return absl::InvalidArgumentError(absl::StrCat("--num-layers ", options.num_layers, " is more than the ",
                                                     options.shape.name, " shape's ", options.shape.num_hidden_layers));
    options.shape.num_hidden_layers = options.num_layers;
  }
  return options;
}

}  // namespace ernie::make_model
