#include "tools/make_model/checkpoint_writer.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <thread>

#include "absl/strings/str_format.h"
#include "engine/model/safetensors_writer.h"
#include "engine/util/status_macros.h"
#include "nlohmann/json.hpp"
#include "tools/make_model/random_weights.h"

namespace ernie::make_model {
namespace {

uint64_t TensorBytes(const TensorEntry& tensor, WeightDtype dtype) {
  return static_cast<uint64_t>(NumElements(tensor)) * WeightDtypeBytes(dtype);
}

absl::Status WriteIndex(const std::string& dir, const std::vector<TensorEntry>& tensors,
                        const std::vector<ShardPlan>& plan) {
  uint64_t total = 0;
  nlohmann::json weight_map = nlohmann::json::object();  // sorted by name, as HF writes it
  for (const ShardPlan& shard : plan) {
    total += shard.data_bytes;
    for (size_t index : shard.tensor_indices) weight_map[tensors[index].name] = shard.file_name;
  }
  const nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  const std::string path = dir + "/model.safetensors.index.json";
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << index.dump(2) << "\n";
  out.close();
  if (!out) return absl::InternalError("cannot write '" + path + "'");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<ShardPlan>> PlanShards(const std::vector<TensorEntry>& tensors,
                                                  WeightDtype dtype, uint64_t max_shard_bytes) {
  if (max_shard_bytes == 0) return absl::InvalidArgumentError("--max-shard-bytes must be positive");
  if (tensors.empty()) return absl::InvalidArgumentError("a checkpoint needs at least one tensor");
  std::vector<ShardPlan> plan;
  uint64_t total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t bytes = TensorBytes(tensors[i], dtype);
    total += bytes;
    if (plan.empty() || (!plan.back().tensor_indices.empty() &&
                         plan.back().data_bytes + bytes > max_shard_bytes)) {
      plan.push_back({});
    }
    plan.back().tensor_indices.push_back(i);
    plan.back().data_bytes += bytes;
  }
  if (total <= max_shard_bytes || plan.size() == 1) {
    plan.resize(1);
    plan[0].file_name = "model.safetensors";
    return plan;
  }
  for (size_t k = 0; k < plan.size(); ++k) {
    plan[k].file_name = absl::StrFormat("model-%05d-of-%05d.safetensors", k + 1, plan.size());
  }
  return plan;
}

absl::StatusOr<std::vector<ShardPlan>> WriteCheckpoint(const std::string& dir,
                                                       const std::vector<TensorEntry>& tensors,
                                                       const CheckpointOptions& options) {
  ERNIE_ASSIGN_OR_RETURN(std::vector<ShardPlan> plan,
                         PlanShards(tensors, options.dtype, options.max_shard_bytes));
  if (options.threads < 0) return absl::InvalidArgumentError("the writer's thread count must not be negative");
  const std::string dtype_name = SafetensorsDtypeName(options.dtype);
  auto write_shard = [&](const ShardPlan& shard) {
    std::vector<model::SafetensorsTensorSpec> specs;
    specs.reserve(shard.tensor_indices.size());
    for (size_t index : shard.tensor_indices) {
      specs.push_back({.name = tensors[index].name, .dtype = dtype_name, .shape = tensors[index].shape});
    }
    auto fill = [&](size_t spec_index, uint64_t byte_offset, std::span<uint8_t> chunk) {
      const TensorEntry& tensor = tensors[shard.tensor_indices[spec_index]];
      return FillWeightBytes(options.seed, tensor, options.dtype, byte_offset, chunk);
    };
    return model::WriteSafetensors(dir + "/" + shard.file_name, specs, fill);
  };
  // Workers take the next unwritten shard; each shard's status is kept, and
  // the first failure in plan order is the one reported.
  std::vector<absl::Status> results(plan.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t k = next.fetch_add(1); k < plan.size(); k = next.fetch_add(1)) results[k] = write_shard(plan[k]);
  };
  const size_t hardware = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min(plan.size(), options.threads > 0 ? static_cast<size_t>(options.threads) : hardware);
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  for (const absl::Status& status : results) ERNIE_RETURN_IF_ERROR(status);
  if (plan.size() > 1) ERNIE_RETURN_IF_ERROR(WriteIndex(dir, tensors, plan));
  return plan;
}

}  // namespace ernie::make_model
