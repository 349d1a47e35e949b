#include "engine/backend/cuda/tuned_gemm.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/util/status_macros.h"

namespace ernie::cuda {

namespace {

constexpr int kCandidates = 8;  // of the heuristic's list: the H100's best was within its first 6 (v52)
constexpr int kPasses = 2;      // every configuration timed in each pass, the passes interleaved
constexpr int kLaunches = 3;    // timed launches a configuration a pass, after one untimed

int AlgoConfig(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attribute) {
  int value = 0;
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &value, sizeof(value), &written) !=
      CUBLAS_STATUS_SUCCESS)
    return -1;
  return value;
}

// Two events, destroyed on every path.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  ~EventPair() {
    if (start != nullptr) cudaEventDestroy(start);
    if (stop != nullptr) cudaEventDestroy(stop);
  }
};

}  // namespace

struct TunedGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo = {};
  ~Plan() {
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (d != nullptr) cublasLtMatrixLayoutDestroy(d);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
  // The column-major view gemm.h uses: y^T [n, m] = W [n, k] (col-major
  // [k, n], transposed) times x^T [k, m].
  absl::Status Describe(int64_t m, int64_t n, int64_t k) {
    const cublasOperation_t transpose = CUBLAS_OP_T, none = CUBLAS_OP_N;
    ERNIE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                                 "cublasLtMatmulDescCreate");
    ERNIE_CUBLAS_RETURN_IF_ERROR(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose)),
        "cublasLtMatmulDescSetAttribute(TRANSA)");
    ERNIE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof(none)),
                                 "cublasLtMatmulDescSetAttribute(TRANSB)");
    ERNIE_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, k, n, k), "cublasLtMatrixLayoutCreate(W)");
    ERNIE_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, k, m, k), "cublasLtMatrixLayoutCreate(x)");
    ERNIE_CUBLAS_RETURN_IF_ERROR(cublasLtMatrixLayoutCreate(&d, CUDA_R_32F, n, m, n), "cublasLtMatrixLayoutCreate(y)");
    return absl::OkStatus();
  }
  cublasStatus_t Launch(cublasLtHandle_t handle, const cublasLtMatmulAlgo_t& with, const uint16_t* x,
                        const uint16_t* w, float* y, cudaStream_t stream) const {
    const float alpha = 1.0f, beta = 0.0f;
    return cublasLtMatmul(handle, desc, &alpha, w, a, x, b, &beta, y, d, y, d, &with, nullptr, 0, stream);
  }
};

absl::StatusOr<TunedGemm> TunedGemm::Create(cudaStream_t stream, int64_t n, int64_t k) {
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (n <= 0 || k <= 0 || n > kMax || k > kMax)
    return absl::InvalidArgumentError(absl::StrCat("tuned GEMM of n=", n, " k=", k, " is not supported"));
  TunedGemm g;
  g.stream_ = stream;
  g.n_ = n;
  g.k_ = k;
  ERNIE_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&g.handle_), "cublasLtCreate");
  return g;
}

TunedGemm::TunedGemm(TunedGemm&& other) noexcept
    : stream_(other.stream_),
      n_(other.n_),
      k_(other.k_),
      handle_(std::exchange(other.handle_, nullptr)),
      buckets_(std::move(other.buckets_)),
      tunings_(std::move(other.tunings_)) {}

TunedGemm& TunedGemm::operator=(TunedGemm&& other) noexcept {
  if (this != &other) {
    buckets_.clear();
    if (handle_ != nullptr) cublasLtDestroy(handle_);
    stream_ = other.stream_;
    n_ = other.n_;
    k_ = other.k_;
    handle_ = std::exchange(other.handle_, nullptr);
    buckets_ = std::move(other.buckets_);
    tunings_ = std::move(other.tunings_);
  }
  return *this;
}

TunedGemm::~TunedGemm() {
  buckets_.clear();  // the descriptors before the handle
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

absl::StatusOr<GemmTuning> TunedGemm::Tune(const Gemm& fallback, const uint16_t* x, int64_t m, const uint16_t* w,
                                           float* y) {
  if (m <= 0 || m > std::numeric_limits<int>::max())
    return absl::InvalidArgumentError(absl::StrCat("tuned GEMM of m=", m, " is not supported"));
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  ERNIE_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream_, &capturing), "cudaStreamIsCapturing");
  if (capturing != cudaStreamCaptureStatusNone)
    return absl::FailedPreconditionError("the lm_head GEMM cannot be tuned during graph capture");
  if (buckets_.contains(m)) return absl::FailedPreconditionError(absl::StrCat("m=", m, " is tuned already"));
  auto plan = std::make_unique<Plan>();
  ERNIE_RETURN_IF_ERROR(plan->Describe(m, n_, k_));

  // Candidates that need no workspace and no split-k (the weights read once).
  cublasLtMatmulPreference_t preference = nullptr;
  ERNIE_CUBLAS_RETURN_IF_ERROR(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
  const uint64_t no_workspace = 0;
  cublasLtMatmulHeuristicResult_t found[kCandidates] = {};
  int count = 0;
  cublasStatus_t heuristic = cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &no_workspace, sizeof(no_workspace));
  if (heuristic == CUBLAS_STATUS_SUCCESS)
    heuristic = cublasLtMatmulAlgoGetHeuristic(handle_, plan->desc, plan->a, plan->b, plan->d, plan->d, preference,
                                               kCandidates, found, &count);
  cublasLtMatmulPreferenceDestroy(preference);
  ERNIE_CUBLAS_RETURN_IF_ERROR(heuristic, "cublasLtMatmulAlgoGetHeuristic");
  std::vector<cublasLtMatmulAlgo_t> candidates;
  for (int i = 0; i < count; ++i)
    if (found[i].state == CUBLAS_STATUS_SUCCESS && found[i].workspaceSize == 0 &&
        AlgoConfig(found[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM) <= 1)
      candidates.push_back(found[i].algo);

  // Configuration 0 is the default; c > 0 is candidate c - 1. Each pass times
  // every configuration in turn, so drift over the tuning affects all alike.
  const size_t configs = candidates.size() + 1;
  auto launch = [&](size_t c) -> absl::Status {
    if (c == 0) return fallback.Run(x, m, k_, w, n_, y, GemmOutput::kF32);
    return CublasStatus(plan->Launch(handle_, candidates[c - 1], x, w, y, stream_), "cublasLtMatmul candidate");
  };
  std::vector<double> best_us(configs, std::numeric_limits<double>::infinity());
  std::vector<bool> failed(configs, false);
  EventPair events;
  ERNIE_CUDA_RETURN_IF_ERROR(cudaEventCreate(&events.start), "cudaEventCreate");
  ERNIE_CUDA_RETURN_IF_ERROR(cudaEventCreate(&events.stop), "cudaEventCreate");
  for (int pass = 0; pass < kPasses; ++pass) {
    for (size_t c = 0; c < configs; ++c) {
      if (failed[c]) continue;
      absl::Status launched = launch(c);  // untimed: first-use costs off the clock
      ERNIE_CUDA_RETURN_IF_ERROR(cudaEventRecord(events.start, stream_), "cudaEventRecord");
      for (int i = 0; launched.ok() && i < kLaunches; ++i) launched = launch(c);
      ERNIE_CUDA_RETURN_IF_ERROR(cudaEventRecord(events.stop, stream_), "cudaEventRecord");
      ERNIE_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(events.stop), "cudaEventSynchronize");
      if (!launched.ok()) {
        if (c == 0) return launched;  // the default must run
        failed[c] = true;             // a candidate cuBLASLt offered but cannot run here: not kept
        continue;
      }
      float ms = 0;
      ERNIE_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, events.start, events.stop), "cudaEventElapsedTime");
      best_us[c] = std::min(best_us[c], 1e3 * ms / kLaunches);
    }
  }
  size_t best = 0;
  for (size_t c = 1; c < configs; ++c)
    if (!failed[c] && best_us[c] < best_us[best]) best = c;
  GemmTuning t{.m = m,
               .default_us = best_us[0],
               .best_us = best_us[best],
               .candidates = static_cast<int>(candidates.size()),
               .lt_chosen = best != 0 && best_us[0] >= kMinGain * best_us[best]};
  if (t.lt_chosen) {
    plan->algo = candidates[best - 1];
    buckets_[m] = std::move(plan);
  } else {
    t.best_us = t.default_us;
    buckets_[m] = nullptr;
  }
  tunings_.push_back(t);
  return t;
}

absl::StatusOr<bool> TunedGemm::Run(const uint16_t* x, int64_t m, const uint16_t* w, float* y) const {
  const auto bucket = buckets_.find(m);
  if (bucket == buckets_.end() || bucket->second == nullptr) return false;
  const Plan& plan = *bucket->second;
  ERNIE_RETURN_IF_ERROR(CublasStatus(plan.Launch(handle_, plan.algo, x, w, y, stream_),
                                     absl::StrCat("cublasLtMatmul m=", m, " n=", n_, " k=", k_)));
  return true;
}

}  // namespace ernie::cuda
