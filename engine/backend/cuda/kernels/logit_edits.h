// Applies rows' logits processors to float32 logits rows in place on the
// device, before the sampling kernel reads them: logit_bias and the
// penalties (as engine/sample/logit_edit.h lists them; the arithmetic is
// logit_edit_math.h), then the min_tokens ban (the banned ids' logits set to
// -inf). The host's ApplyLogitsProcessors bans between the bias and the
// penalties, but a penalty leaves -inf at -inf (its factors are finite and
// positive), so banning last gives the same row. A few hundred edits a row
// instead of a 400 KB copy of the row to the host sampler.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/sample/logit_edit_math.h"

namespace ernie::cuda {

// One edited row: edits [first_edit, first_edit + num_edits) of the list,
// then bans [first_ban, first_ban + num_bans).
struct LogitEditRow {
  int32_t logit_row = 0;
  int32_t first_edit = 0;
  int32_t num_edits = 0;
  int32_t first_ban = 0;
  int32_t num_bans = 0;
  LogitEditParams params;
};

struct LogitEditsParams {
  float* logits = nullptr;  // [logit rows, vocab]
  int32_t vocab = 0;
  const LogitEditRow* rows = nullptr;  // [num_rows]; no logit row twice
  int32_t num_rows = 0;
  const LogitEdit* edits = nullptr;    // every row's edits; no token twice in a row (null: none)
  const int32_t* bans = nullptr;       // every row's banned ids; may repeat (null: none)
  // Null, or one float an edit: the logit each edit found (what the row held
  // before it), for the raw log-probability of a sampled token the edits changed.
  float* originals = nullptr;
};

cudaError_t LaunchLogitEdits(const LogitEditsParams& p, cudaStream_t stream);

}  // namespace ernie::cuda
