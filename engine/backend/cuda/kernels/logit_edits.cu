#include "engine/backend/cuda/kernels/logit_edits.h"

namespace ernie::cuda {
namespace {

// A CTA a row, its threads over the row's edits (distinct tokens, so no two
// threads write one logit), then over its bans (a banned id may also be
// edited, so the bans wait for every edit of the row).
__global__ void LogitEditsKernel(LogitEditsParams p) {
  const LogitEditRow row = p.rows[blockIdx.x];
  float* logits = p.logits + static_cast<int64_t>(row.logit_row) * p.vocab;
  for (int32_t i = threadIdx.x; i < row.num_edits; i += blockDim.x) {
    const LogitEdit e = p.edits[row.first_edit + i];
    if (e.token_id < 0 || e.token_id >= p.vocab) continue;  // the host leaves these out; never trust an index
    const float before = logits[e.token_id];
    if (p.originals != nullptr) p.originals[row.first_edit + i] = before;
    logits[e.token_id] = EditedLogit(before, e, row.params);
  }
  if (row.num_bans == 0) return;  // the same for every thread of the CTA
  __syncthreads();
  for (int32_t i = threadIdx.x; i < row.num_bans; i += blockDim.x) {
    const int32_t id = p.bans[row.first_ban + i];
    if (id >= 0 && id < p.vocab) logits[id] = -INFINITY;  // the host skips ids outside the row too
  }
}

}  // namespace

cudaError_t LaunchLogitEdits(const LogitEditsParams& p, cudaStream_t stream) {
  if (p.num_rows == 0) return cudaSuccess;
  if (p.logits == nullptr || p.rows == nullptr || p.num_rows < 0 || p.vocab < 1)
    return cudaErrorInvalidValue;
  LogitEditsKernel<<<static_cast<unsigned>(p.num_rows), 256, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace ernie::cuda
