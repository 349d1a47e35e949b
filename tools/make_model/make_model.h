// Writes a whole random checkpoint directory: configs, tokenizer, weights.
#pragma once

#include "absl/status/status.h"
#include "tools/make_model/make_model_options.h"

namespace ernie::make_model {

// Creates options.output_dir if needed. The tokenizer is trained before any
// weight is written, so a bad corpus fails fast.
absl::Status MakeModel(const MakeModelOptions& options);

}  // namespace ernie::make_model
