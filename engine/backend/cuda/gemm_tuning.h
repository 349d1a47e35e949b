// What timing one GEMM's algorithms at start found for one row count
// (tuned_gemm.h; CudaBackend::lm_head_tunings reports them). No CUDA types,
// so the backend's public header can carry it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace ernie {

struct GemmTuning {
  int64_t m = 0;          // rows of x
  double default_us = 0;  // cuBLAS's default (cublasGemmEx), a launch
  double best_us = 0;     // the kept algorithm's time (default_us when the default stayed)
  int candidates = 0;     // cuBLASLt heuristic candidates timed beside it
  bool lt_chosen = false;
};

// The row counts the lm_head's tuning times at start (tuned_gemm.h: a GEMM
// of exactly a bucket's rows takes its algorithm, other rows cuBLAS's
// default): powers of two up to 16, then about 1.5x apart (the batch sizes
// benchmarks and clients use most: 16, 32, 64, 128, 256 among them), each
// past `above` (rows the small-batch lm_head takes) and the last one `up_to`
// (a logit pass's rows). Few enough that timing them all at start takes a
// fraction of a second.
inline std::vector<int64_t> LmHeadTuningBuckets(int64_t above, int64_t up_to) {
  std::vector<int64_t> buckets;
  for (int64_t rows = 1; above < up_to; rows = rows < 16 ? rows * 2 : rows % 3 == 0 ? rows / 3 * 4 : rows / 2 * 3) {
    if (rows <= above) continue;
    buckets.push_back(std::min(rows, up_to));
    if (rows >= up_to) break;
  }
  return buckets;
}

}  // namespace ernie
