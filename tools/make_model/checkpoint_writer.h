// Writes a model's random weights as Hugging Face does: one
// model.safetensors, or, past the shard limit, model-0000K-of-0000N.safetensors
// files plus model.safetensors.index.json.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tools/make_model/model_shape.h"
#include "tools/make_model/weight_dtype.h"

namespace ernie::make_model {

// Hugging Face's default max_shard_size, "5GB" (decimal).
inline constexpr uint64_t kDefaultMaxShardBytes = 5'000'000'000ull;

struct ShardPlan {
  std::string file_name;               // "model.safetensors" or "model-00001-of-00002.safetensors"
  std::vector<size_t> tensor_indices;  // into the tensor list, in list order
  uint64_t data_bytes = 0;             // sum of the tensors' bytes
};

// Splits `tensors` (in state-dict order) the way transformers'
// save_pretrained does: a shard is closed when the next tensor would take it
// past `max_shard_bytes`; a tensor larger than the limit gets a shard of its
// own. A model whose total fits is one "model.safetensors".
absl::StatusOr<std::vector<ShardPlan>> PlanShards(const std::vector<TensorEntry>& tensors,
                                                  WeightDtype dtype, uint64_t max_shard_bytes);

struct CheckpointOptions {
  uint64_t seed = 0;
  WeightDtype dtype = WeightDtype::kBFloat16;
  uint64_t max_shard_bytes = kDefaultMaxShardBytes;
  // Shards written at once, each by its own thread; 0: one per hardware
  // thread. The bytes do not depend on it (every value is a pure function
  // of seed, tensor and index).
  int threads = 0;
};

// Writes the weight files of `tensors` into the existing directory `dir`
// and, when sharded, the index. Returns the plan it followed. Shards are
// written in parallel: written by one thread, the whole 21B-A3B (43.7 GB)
// took most of a 370 s device call (NOTES.md v12), and making its values
// alone is ~85 s of one core (~4 ns a value: the 0.3b's 0.36 G values take
// 2.8 s on the 2-core build machine), so several shards at once leave the
// disk as the limit. The first failing shard's error (in plan order) is
// returned.
absl::StatusOr<std::vector<ShardPlan>> WriteCheckpoint(const std::string& dir,
                                                       const std::vector<TensorEntry>& tensors,
                                                       const CheckpointOptions& options);

}  // namespace ernie::make_model
