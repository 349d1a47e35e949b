// Helpers shared by the CUDA backend tests: drive any Backend through whole
// sequences (teacher-forced, chunked, or greedy), and compare logits.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/model/ernie4_5_weights.h"

namespace ernie::testing {

// Skips the current test unless a CUDA device is visible.
#define ERNIE_SKIP_WITHOUT_CUDA_DEVICE()                                                            \
  do {                                                                                              \
    if (::ernie::CudaDeviceCount() == 0)                                                            \
      GTEST_SKIP() << "no CUDA device visible: gpu tests run on the accelerator machine (tools/gpu-test)"; \
  } while (false)

// tests/data, or $ERNIE_TEST_DATA_DIR when set (the device machine runs the
// binaries from another checkout path).
std::string TestDataDir();

// "FOLDER/NAME" for every checkpoint directory under tests/data/FOLDER.
std::vector<std::string> ReferenceCases(const std::string& folder);

// Block ids 0, 1, 2, ... covering `tokens` positions, offset by `first`.
std::vector<int32_t> ConsecutiveBlocks(int64_t tokens, int64_t block_size, int32_t first = 0);

// Runs `tokens` as one sequence from position `cached` (positions below it
// already in the cache under `table`), `chunk` tokens per Forward, and
// returns the logits of every new position: [tokens.size(), vocab].
std::vector<float> TeacherForced(Backend& backend, std::span<const int32_t> tokens, int32_t cached, int32_t chunk,
                                 std::span<const int32_t> table);

// ||a - ref|| / ||ref|| over n floats.
double RelativeL2(const float* a, const float* ref, int64_t n);

// Greedy pick and the gap between the two largest logits of one row.
struct Top2 {
  int32_t token = 0;
  float gap = 0;
};
Top2 ArgmaxWithGap(const float* row, int64_t vocab);

}  // namespace ernie::testing
