// Builds the engine a worker serves from its configuration: loads the model,
// sizes the KV pool (reported as blocks, tokens and bytes) and creates the
// chosen backend.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/backend/backend.h"
#include "engine/core/engine_core.h"
#include "engine/model/ernie4_5_weights.h"
#include "services/worker/worker_config.h"

namespace ernie::worker {

struct ServingModel {
  std::unique_ptr<LoadedModel> model;   // null for the instant backend
  std::unique_ptr<Backend> backend;
  EngineConfig engine;
  std::string architecture;             // for GetModelInfo
  std::string dtype;
  std::string kv_report;                // "KV cache: N blocks x B tokens = T tokens, X MiB"
  int64_t weight_bytes = 0;             // the checkpoint's, or (--load-format dummy) what the device holds
};

absl::StatusOr<ServingModel> BuildServingModel(const WorkerConfig& config);

}  // namespace ernie::worker
