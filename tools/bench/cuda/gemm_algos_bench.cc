// ernie-bench-gemm-algos: how far cuBLAS's default choice (cublasGemmEx with
// CUBLAS_GEMM_DEFAULT, what gemm.h runs) is from the fastest algorithm
// cuBLASLt offers, on the linears of the 0.3b shape at decode and prefill
// row counts, and on the lm_heads of both models (--shapes picks them; by
// default the 0.3b's four layer linears). For each (shape, m): the default's time, then every candidate
// cublasLtMatmulAlgoGetHeuristic returns (up to --candidates), timed the same
// way; one JSON line each on stdout and in --log, and a summary line with
// the best candidate against the default.
//
//   ernie-bench-gemm-algos [--log FILE] [--ms 16,64,256,2048] [--candidates 24] [--reps 20]
//                          [--shapes qkv_0.3b,o_proj_0.3b,gate_up_0.3b,down_0.3b,lm_head_0.3b,lm_head_21b]
//
// Timing as ernie-bench-gemv (graph_timer.h): each launch reads its own copy
// of the weights, the copies together >= 200 MB (4x the L2).
// Output float32 [m, n], as the backend's GEMMs write.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "tools/bench/cuda/graph_timer.h"
#include "tools/bench/cuda/int_list_flag.h"

namespace {

constexpr double kHbmBytesPerSecond = 4.3e12;
constexpr int64_t kFlushBytes = int64_t{200} << 20;
constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // as gemm.cc

struct Shape {
  const char* name;
  int64_t k, n;
};
constexpr Shape kShapes[] = {
    {"qkv_0.3b", 1024, 2560},          {"o_proj_0.3b", 2048, 1024}, {"gate_up_0.3b", 1024, 6144},
    {"down_0.3b", 3072, 1024},         {"lm_head_0.3b", 1024, 103424},  // the step's largest GEMM at 33 - 256 rows
    {"lm_head_21b", 2560, 103424}};

struct Args {
  std::string log;
  std::vector<int64_t> ms = {16, 64, 256, 2048};
  std::vector<std::string> shapes = {"qkv_0.3b", "o_proj_0.3b", "gate_up_0.3b", "down_0.3b"};
  int candidates = 24, reps = 20;
};

bool Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::cerr << "ernie-bench-gemm-algos: " << what << ": " << cudaGetErrorString(e) << "\n";
  return false;
}
bool Check(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return true;
  std::cerr << "ernie-bench-gemm-algos: " << what << ": cuBLAS status " << static_cast<int>(s) << "\n";
  return false;
}

// Microseconds per launch (graph_timer.h), or -1 when a launch failed (reported).
double TimeGraph(cudaStream_t stream, int copies, int reps, const std::function<bool(int)>& launch) {
  const absl::StatusOr<double> us = ernie::bench::TimeLaunchesInGraph(
      stream, copies, reps, [&](int c) { return launch(c) ? absl::OkStatus() : absl::InternalError("launch failed"); });
  if (!us.ok()) {
    std::cerr << "ernie-bench-gemm-algos: " << us.status() << "\n";
    return -1;
  }
  return *us;
}

bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i], v = argv[i + 1];
    if (f == "--log") {
      a->log = v;
    } else if (f == "--ms") {
      if (!ernie::bench::ParsePositiveIntList(v, &a->ms)) return false;
    } else if (f == "--shapes") {
      a->shapes = absl::StrSplit(v, ',');
      for (const std::string& name : a->shapes)
        if (std::none_of(std::begin(kShapes), std::end(kShapes), [&](const Shape& s) { return name == s.name; }))
          return false;
    } else if (f == "--candidates") {
      if (!absl::SimpleAtoi(v, &a->candidates) || a->candidates <= 0) return false;
    } else if (f == "--reps") {
      if (!absl::SimpleAtoi(v, &a->reps) || a->reps <= 0) return false;
    } else {
      return false;
    }
  }
  return argc % 2 == 1;
}

int AlgoConfig(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  int value = 0;
  size_t written = 0;
  cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &value, sizeof(value), &written);
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!Parse(argc, argv, &args)) {
    std::cerr << "usage: ernie-bench-gemm-algos [--log FILE] [--ms 16,64,256,2048] [--candidates N] [--reps N] "
                 "[--shapes NAME,...] (names: qkv_0.3b o_proj_0.3b gate_up_0.3b down_0.3b lm_head_0.3b lm_head_21b)\n";
    return 2;
  }
  std::ofstream log;
  if (!args.log.empty()) log.open(args.log);
  auto emit = [&](const nlohmann::json& j) {
    std::cout << j.dump() << "\n";
    if (log) log << j.dump() << "\n";
  };
  cudaStream_t stream;
  cublasHandle_t blas;
  cublasLtHandle_t lt;
  void* workspace = nullptr;
  if (!Check(cudaStreamCreate(&stream), "stream") || !Check(cublasCreate(&blas), "cublasCreate") ||
      !Check(cublasLtCreate(&lt), "cublasLtCreate") || !Check(cudaMalloc(&workspace, kWorkspaceBytes), "workspace") ||
      !Check(cublasSetStream(blas, stream), "cublasSetStream") ||
      !Check(cublasSetWorkspace(blas, workspace, kWorkspaceBytes), "cublasSetWorkspace"))
    return 1;
  const int64_t max_m = *std::max_element(args.ms.begin(), args.ms.end());
  int failures = 0;
  for (const Shape& s : kShapes) {
    if (std::find(args.shapes.begin(), args.shapes.end(), s.name) == args.shapes.end()) continue;
    const int64_t weight_bytes = 2 * s.n * s.k;
    const int copies = static_cast<int>(std::min<int64_t>(64, (kFlushBytes + weight_bytes - 1) / weight_bytes));
    void *w = nullptr, *x = nullptr, *y = nullptr;
    if (!Check(cudaMalloc(&w, weight_bytes * copies), "weights") || !Check(cudaMalloc(&x, 2 * max_m * s.k), "x") ||
        !Check(cudaMalloc(&y, 4 * max_m * s.n), "y"))
      return 1;
    // Small values (bf16 0x3c00 = 0.0078): no overflow, no denormals.
    cudaMemset(w, 0x3c, weight_bytes * copies);
    cudaMemset(x, 0x3c, 2 * max_m * s.k);
    auto weights = [&](int c) { return static_cast<char*>(w) + weight_bytes * c; };
    for (const int64_t m : args.ms) {
      const float alpha = 1.0f, beta = 0.0f;
      const auto n32 = static_cast<int>(s.n), m32 = static_cast<int>(m), k32 = static_cast<int>(s.k);
      const double default_us = TimeGraph(stream, copies, args.reps, [&](int c) {
        return Check(
            cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, n32, m32, k32, &alpha, weights(c), CUDA_R_16BF, k32, x,
                         CUDA_R_16BF, k32, &beta, y, CUDA_R_32F, n32, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx");
      });
      const double bytes = static_cast<double>(weight_bytes + 2 * m * s.k + 4 * m * s.n);
      emit({{"shape", s.name},
            {"m", m},
            {"algo", "gemm_ex_default"},
            {"us", default_us},
            {"hbm_fraction", bytes / (default_us * 1e-6) / kHbmBytesPerSecond}});

      // The same product through cuBLASLt: D^T [n, m] = W [n, k] (col-major [k, n], transposed) x^T [k, m].
      cublasLtMatmulDesc_t desc;
      cublasLtMatrixLayout_t a_layout, b_layout, d_layout;
      cublasLtMatmulPreference_t pref;
      const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
      cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof(op_t));
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n));
      cublasLtMatrixLayoutCreate(&a_layout, CUDA_R_16BF, s.k, s.n, s.k);
      cublasLtMatrixLayoutCreate(&b_layout, CUDA_R_16BF, s.k, m, s.k);
      cublasLtMatrixLayoutCreate(&d_layout, CUDA_R_32F, s.n, m, s.n);
      cublasLtMatmulPreferenceCreate(&pref);
      const uint64_t ws = kWorkspaceBytes;
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
      std::vector<cublasLtMatmulHeuristicResult_t> results(static_cast<size_t>(args.candidates));
      int found = 0;
      Check(cublasLtMatmulAlgoGetHeuristic(lt, desc, a_layout, b_layout, d_layout, d_layout, pref, args.candidates,
                                           results.data(), &found),
            "cublasLtMatmulAlgoGetHeuristic");
      double best_us = -1;
      int best = -1;
      for (int i = 0; i < found; ++i) {
        const cublasLtMatmulAlgo_t& algo = results[static_cast<size_t>(i)].algo;
        const double us = TimeGraph(stream, copies, args.reps, [&](int c) {
          return Check(cublasLtMatmul(lt, desc, &alpha, weights(c), a_layout, x, b_layout, &beta, y, d_layout, y,
                                      d_layout, &algo, workspace, kWorkspaceBytes, stream),
                       "cublasLtMatmul");
        });
        emit({{"shape", s.name},
              {"m", m},
              {"algo", "lt_heuristic"},
              {"rank", i},
              {"algo_id", AlgoConfig(algo, CUBLASLT_ALGO_CONFIG_ID)},
              {"tile", AlgoConfig(algo, CUBLASLT_ALGO_CONFIG_TILE_ID)},
              {"stages", AlgoConfig(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID)},
              {"split_k", AlgoConfig(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM)},
              {"reduction", AlgoConfig(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME)},
              {"cluster", AlgoConfig(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID)},
              {"workspace", results[static_cast<size_t>(i)].workspaceSize},
              {"us", us},
              {"hbm_fraction", us > 0 ? bytes / (us * 1e-6) / kHbmBytesPerSecond : 0.0}});
        if (us > 0 && (best_us < 0 || us < best_us)) {
          best_us = us;
          best = i;
        }
      }
      emit({{"shape", s.name},
            {"m", m},
            {"summary", true},
            {"candidates", found},
            {"default_us", default_us},
            {"best_us", best_us},
            {"best_rank", best},
            {"speedup", best_us > 0 ? default_us / best_us : 0.0}});
      if (best_us < 0) ++failures;
      cublasLtMatmulPreferenceDestroy(pref);
      cublasLtMatrixLayoutDestroy(a_layout);
      cublasLtMatrixLayoutDestroy(b_layout);
      cublasLtMatrixLayoutDestroy(d_layout);
      cublasLtMatmulDescDestroy(desc);
    }
    cudaFree(w);
    cudaFree(x);
    cudaFree(y);
  }
  return failures == 0 ? 0 : 1;
}
