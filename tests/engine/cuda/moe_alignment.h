// The MoE alignment run on the device for a test's chosen experts: the
// buffers LaunchMoeAlign fills, sized by MoeSlotCapacity, for the grouped
// expert kernels' tests to read their tile table from (cuda_moe_test,
// cuda_moe_awq_test).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/kernels/moe_routing.h"
#include "tests/engine/cuda/device_copies.h"

namespace ernie::testing {

struct DeviceAlignment {
  int64_t slots = 0;  // MoeSlotCapacity of the assignments
  cuda::DeviceBuffer<int32_t> ids, slot_token, slot_of, tile_expert, tiles;
};

// Aligns `ids` (tokens x top_k choices, token-major) into tiles of
// `tile_rows` slots in *out; a failed launch is a fatal failure (call it
// inside ASSERT_NO_FATAL_FAILURE).
inline void AlignOnDevice(const std::vector<int32_t>& ids, int top_k, int experts, int tile_rows,
                          DeviceAlignment* out) {
  DeviceAlignment& a = *out;
  const auto assignments = static_cast<int32_t>(ids.size());
  a.slots = cuda::MoeSlotCapacity(assignments, experts, tile_rows);
  a.ids = Upload(ids);
  a.slot_token = Zeros<int32_t>(static_cast<size_t>(a.slots));
  a.slot_of = Zeros<int32_t>(ids.size());
  a.tile_expert = Zeros<int32_t>(static_cast<size_t>(a.slots / tile_rows));
  a.tiles = Zeros<int32_t>(1);
  ASSERT_EQ(cuda::LaunchMoeAlign({.topk_ids = a.ids.data(),
                                  .assignments = assignments,
                                  .top_k = top_k,
                                  .experts = experts,
                                  .tile_rows = tile_rows,
                                  .slot_token = a.slot_token.data(),
                                  .slot_of = a.slot_of.data(),
                                  .tile_expert = a.tile_expert.data(),
                                  .num_tiles = a.tiles.data()},
                                 nullptr),
            cudaSuccess);
}

}  // namespace ernie::testing
