// What timing one GEMM's algorithms at start found for one row count
// (tuned_gemm.h; CudaBackend::lm_head_tunings reports them). No CUDA types,
// so the backend's public header can carry it.
#pragma once

#include <cstdint>

namespace ernie {

struct GemmTuning {
  int64_t m = 0;          // rows of x
  double default_us = 0;  // cuBLAS's default (cublasGemmEx), a launch
  double best_us = 0;     // the kept algorithm's time (default_us when the default stayed)
  int candidates = 0;     // cuBLASLt heuristic candidates timed beside it
  bool lt_chosen = false;
};

}  // namespace ernie
