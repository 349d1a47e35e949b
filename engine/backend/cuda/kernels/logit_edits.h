// Applies rows' logits processors (logit_bias and the penalties, as
// engine/sample/logit_edit.h lists them; the arithmetic is logit_edit_math.h) to float32 logits rows in place on
// the device, before the sampling kernel reads them: a few hundred edits a
// row instead of a 400 KB copy of the row to the host sampler.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/sample/logit_edit_math.h"

namespace ernie::cuda {

// One edited row: edits [first_edit, first_edit + num_edits) of the list.
struct LogitEditRow {
  int32_t logit_row = 0;
  int32_t first_edit = 0;
  int32_t num_edits = 0;
  LogitEditParams params;
};

struct LogitEditsParams {
  float* logits = nullptr;  // [logit rows, vocab]
  int32_t vocab = 0;
  const LogitEditRow* rows = nullptr;  // [num_rows]; no logit row twice
  int32_t num_rows = 0;
  const LogitEdit* edits = nullptr;    // every row's edits; no token twice in a row
};

cudaError_t LaunchLogitEdits(const LogitEditsParams& p, cudaStream_t stream);

}  // namespace ernie::cuda
