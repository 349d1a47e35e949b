// y [m, n] float32 = x W^T for one weight shape (the lm_head's), through
// cuBLASLt with the algorithm that measured fastest at each row count, timed
// once at start: PyTorch's TunableOp idea, for the one GEMM where it pays.
//
// Why: cuBLAS's default (cublasGemmEx, gemm.h) takes its heuristic's first
// candidate, and for the lm_head at 16 - 256 rows the heuristic's later
// candidates (same kernel family, an explicit thread-block cluster) are
// faster. ernie-bench-gemm-algos on an H100 (NOTES.md v52): the 0.3b's
// lm_head (k 1,024, n 103,424) at 64 rows 84.5 us against the default's
// 93.2, at 256 rows 114.8 against 122.2; the 21B-A3B's (k 2,560) 190.6
// against 200.8 and 230.7 against 253.5. Every candidate kept here reads its
// weights once (no split-k, no workspace), so only the tile shape differs.
//
// Tuning times a few bucket row counts at start (outside graph capture);
// a GEMM of exactly a bucket's rows then takes its algorithm. Run is
// capturable. Rows that are no bucket, or a bucket whose default won: Run
// says so and the caller runs gemm.h. (Rows between buckets on the next
// bucket's algorithm, planned with cublasLtMatmulAlgoCheck, ran once on an
// H100: the 0.3b at 40 rows was no faster, 0.748 / 0.759 ms against 0.741 /
// 0.739, and the test ran few of them tuned; NOTES.md v53.)
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/gemm_tuning.h"

namespace ernie::cuda {

class TunedGemm {
 public:
  // For W [n, k] bf16 (nn.Linear's layout) and bf16 x; float32 y.
  static absl::StatusOr<TunedGemm> Create(cudaStream_t stream, int64_t n, int64_t k);
  TunedGemm(TunedGemm&&) noexcept;
  TunedGemm& operator=(TunedGemm&&) noexcept;
  TunedGemm(const TunedGemm&) = delete;
  TunedGemm& operator=(const TunedGemm&) = delete;
  ~TunedGemm();

  // Times `fallback` (cuBLAS's default) and cuBLASLt's heuristic candidates
  // at m rows on these buffers (y is overwritten) and makes m a bucket: its
  // algorithm is the fastest candidate if that beats the default by at least
  // kMinGain, else the default. Synchronous on the stream; not during graph
  // capture; each m at most once.
  absl::StatusOr<GemmTuning> Tune(const Gemm& fallback, const uint16_t* x, int64_t m, const uint16_t* w, float* y);
  // What each Tune found, in the order timed.
  const std::vector<GemmTuning>& tunings() const { return tunings_; }
  // y [m, n] = x W^T on the algorithm of the bucket of m rows: true when it
  // ran, false when the caller must run the default (see above).
  absl::StatusOr<bool> Run(const uint16_t* x, int64_t m, const uint16_t* w, float* y) const;

  // A candidate must be at least this much faster than the default to be
  // kept: the timing's noise (a few launches) must not decide.
  static constexpr double kMinGain = 1.02;

 private:
  struct Plan;  // one row count's descriptors and algorithm (tuned_gemm.cc)
  TunedGemm() = default;
  cudaStream_t stream_ = nullptr;
  int64_t n_ = 0, k_ = 0;
  cublasLtHandle_t handle_ = nullptr;
  // Bucket rows -> its plan, null where the default won.
  std::map<int64_t, std::unique_ptr<Plan>> buckets_;
  std::vector<GemmTuning> tunings_;
};

}  // namespace ernie::cuda
