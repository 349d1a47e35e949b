// ernie-bench-gemv: the small-M linear kernels (kernels/gemv_bf16,
// kernels/awq_gemm) beside cuBLAS bf16 (gemm.h) on the same shapes, one JSON
// line per (kernel, shape, m) on stdout and in --log.
//
//   ernie-bench-gemv [--log FILE] [--reps N] [--shape NAME] [--ms 1,8] [--k-slices 1|2|4|8]
//
// Kernels: cublas_bf16 (every m), small_batch_gemm (bf16, the backend's
// kernel for unfused steps of 2 - 64 tokens, every m here; e.g. `--shape
// lm_head_0.3b --ms 16,32,64` for whether lm_head should take it too),
// gemv_bf16 and awq_gemv (m <= 32),
// awq_gemv_bulk (m <= 8: the int4 GEMV's bulk-copy loop, AwqGemvLoop),
// awq_small_batch_gemm (the small-batch GEMM on the int4 weights,
// SmallBatchGemmParams::awq: the backend's kernel for AWQ steps of 16 - 64
// rows; k <= 4,096, so not 8192 x 8192),
// awq_dequant_cublas (the prefill path: dequantise into the workspace, then
// cuBLAS; every m) and awq_dequant alone (m = 0); on each AWQ shape, the
// read-only probes of stream_probe.h as m = 1 rows named probe_* (the
// measured roofline at the shape's bytes, and the int4 GEMV's walk with
// its parts added one at a time). Shapes are k x n (in x out):
// the ERNIE-0.3B linears, its lm_head, 8192 x 8192 and 4096 x 14336 (AWQ
// group 128).
//
// Timing: each launch reads its own copy of the weights, the copies together
// >= 200 MB (4x the H200's 50 MB L2), so no launch finds its weights in L2
// (x and y stay there, as in a decode step). One CUDA graph holds one
// launch per copy; after two warm-up replays, --reps replays are timed with
// CUDA events and the median per launch is reported (launch gaps inside a
// graph included, as in the backend's decode graphs).
// bytes = weights as stored by the checkpoint (bf16: 2 n k; AWQ: n k / 2 +
// fp16 scales + 4-bit zeros) + x (bf16) + y (float32): what the operation
// must move at least, so hbm_fraction = bytes / time / 4.3 TB/s is a
// fraction of the floor, for every path alike; device_peak_fraction divides
// by this card's own peak instead (DevicePeakBytesPerSecond).
// check_rel_err: max |y - y_cublas| / max |y_cublas| on copy 0 (for AWQ:
// against cuBLAS on the dequantised weights).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/backend/cuda/cuda_check.h"
#include "engine/backend/cuda/device_buffer.h"
#include "engine/backend/cuda/gemm.h"
#include "engine/backend/cuda/kernels/awq_gemm.h"
#include "engine/backend/cuda/kernels/awq_repack.h"
#include "engine/backend/cuda/kernels/gemv_bf16.h"
#include "engine/backend/cuda/kernels/small_batch_gemm.h"
#include "engine/util/half.h"
#include "engine/util/status_macros.h"
#include "nlohmann/json.hpp"
#include "tools/bench/cuda/graph_timer.h"
#include "tools/bench/cuda/int_list_flag.h"
#include "tools/bench/cuda/stream_probe.h"

namespace {

using ernie::cuda::DeviceBuffer;

constexpr double kHbmBytesPerSecond = 4.3e12;  // H200 device copy (KINDS.md)
constexpr int64_t kFlushBytes = int64_t{200} << 20;
constexpr int kMaxCopies = 256;
constexpr int kAwqGroup = 128;
constexpr int kMaxM = 128;

struct Shape {
  const char* name;
  int k, n;
  bool bf16_kernel, awq;
};

constexpr Shape kShapes[] = {
    {"qkv_0.3b", 1024, 2560, true, true},    {"gate_up_0.3b", 1024, 6144, true, true},
    {"down_0.3b", 3072, 1024, true, true},   {"lm_head_0.3b", 1024, 103424, true, false},
    {"square_8192", 8192, 8192, true, true}, {"wide_4096x14336", 4096, 14336, false, true},
};
constexpr int kMs[] = {1, 2, 4, 8, 16, 32, 64, 128};

int CopiesFor(int64_t bytes) { return static_cast<int>(std::clamp<int64_t>(kFlushBytes / bytes + 1, 2, kMaxCopies)); }

absl::Status Check(cudaError_t e, const std::string& what) { return ernie::cuda::CudaStatus(e, what); }

// One weight set, `copies` times over; random bf16 in [-1, 1] (AWQ: random nibbles, scales ~0.01).
struct Weights {
  int copies = 0;
  DeviceBuffer<uint16_t> bf16;  // copies x [n, k]
  DeviceBuffer<uint32_t> packed, records;
  int64_t packed_words = 0, record_words = 0;
  const uint16_t* Bf16(int i, const Shape& s) const { return bf16.data() + int64_t{i} * s.n * s.k; }
  ernie::cuda::AwqWeightsView Awq(int i, const Shape& s) const {
    return {.packed = packed.data() + i * packed_words,
            .records = records.data() + i * record_words,
            .n = s.n,
            .k = s.k,
            .group_size = kAwqGroup};
  }
};

template <typename T>
absl::StatusOr<DeviceBuffer<T>> Replicate(const std::vector<T>& host, int copies, const char* what) {
  ERNIE_ASSIGN_OR_RETURN(auto d, DeviceBuffer<T>::Allocate(host.size() * copies, what));
  for (int i = 0; i < copies; ++i)
    ERNIE_RETURN_IF_ERROR(Check(
        cudaMemcpy(d.data() + i * host.size(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), what));
  return d;
}

absl::StatusOr<Weights> MakeWeights(const Shape& s, std::mt19937& gen) {
  Weights w;
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<uint16_t> host(static_cast<size_t>(s.n) * s.k);
  for (auto& v : host) v = ernie::FloatToBf16(unit(gen));
  w.copies = CopiesFor(static_cast<int64_t>(host.size()) * 2);
  ERNIE_ASSIGN_OR_RETURN(w.bf16, Replicate(host, w.copies, "bf16 weights"));
  if (!s.awq) return w;
  std::vector<int32_t> qweight(static_cast<size_t>(s.k) * s.n / 8),
      qzeros(static_cast<size_t>(s.k / kAwqGroup) * s.n / 8);
  for (auto& v : qweight) v = static_cast<int32_t>(gen());
  for (auto& v : qzeros) v = static_cast<int32_t>(gen());
  std::vector<uint16_t> scales(static_cast<size_t>(s.k / kAwqGroup) * s.n);
  for (auto& v : scales) v = ernie::FloatToF16(0.01f + 0.005f * unit(gen));
  ERNIE_ASSIGN_OR_RETURN(
      auto repacked,
      ernie::cuda::RepackAwqLinear(
          {.qweight = qweight, .qzeros = qzeros, .scales = scales, .k = s.k, .n = s.n, .group_size = kAwqGroup}));
  const int64_t awq_bytes = int64_t{s.k} * s.n / 2;
  const int awq_copies = std::max(w.copies, CopiesFor(awq_bytes));
  w.copies = awq_copies;  // the bf16 copies wrap around (i % bf16 copies)
  w.packed_words = static_cast<int64_t>(repacked.packed.size());
  w.record_words = static_cast<int64_t>(repacked.records.size());
  ERNIE_ASSIGN_OR_RETURN(w.packed, Replicate(repacked.packed, awq_copies, "AWQ packed"));
  ERNIE_ASSIGN_OR_RETURN(w.records, Replicate(repacked.records, awq_copies, "AWQ records"));
  return w;
}

// max |a - b| / max |b| over two float [count] device buffers.
absl::StatusOr<double> RelErr(const float* a, const float* b, size_t count) {
  std::vector<float> ha(count), hb(count);
  ERNIE_RETURN_IF_ERROR(Check(cudaMemcpy(ha.data(), a, count * 4, cudaMemcpyDeviceToHost), "check copy"));
  ERNIE_RETURN_IF_ERROR(Check(cudaMemcpy(hb.data(), b, count * 4, cudaMemcpyDeviceToHost), "check copy"));
  double diff = 0, scale = 0;
  for (size_t i = 0; i < count; ++i) {
    diff = std::max(diff, static_cast<double>(std::fabs(ha[i] - hb[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(hb[i])));
  }
  return diff / std::max(scale, 1e-30);
}

struct Args {
  std::string log, shape;  // shape: only this one (for a profiler run)
  int reps = 15;
  int k_slices = 0;  // forwarded to both kernels (0: their own choice)
  std::vector<int> ms = std::vector<int>(std::begin(kMs), std::end(kMs));
};

struct Result {
  std::string kernel, shape;
  int m = 0;
  double us = 0, hbm_fraction = 0, device_peak_fraction = 0;
};

// This card's peak DRAM bandwidth, bytes/s: 2 x the memory clock x the bus
// width (an H100 SXM's 2,619 MHz x 5,120 bits: 3.35 TB/s); 0 if the driver
// does not say. The issues' floors use the H200's 4.3 TB/s whatever the
// card (hbm_fraction); device_peak_fraction is against this, so an H100's
// rows read against its own memory too.
double DevicePeakBytesPerSecond() {
  int device = 0, clock_khz = 0, bus_bits = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) != cudaSuccess) {
    cudaGetLastError();  // clear it: the benchmark goes on without the figure
    return 0.0;
  }
  return 2.0 * clock_khz * 1e3 * bus_bits / 8.0;
}

// The read-only probes (stream_probe.h) on the AWQ copies, as m = 1 rows
// named probe_*: the stream read at a few CTA counts and unrolls, and the
// int4 GEMV's own walk without its math.
template <typename Emit>
absl::Status TimeReadProbes(const Weights& w, const Shape& s, double weight_bytes, const __nv_bfloat16* x, float* y,
                            int k_slices, int reps, cudaStream_t stream, uint32_t* sink, const Emit& emit) {
  struct StreamConfig {
    const char* name;
    int ctas_per_sm, unroll;
  };
  constexpr StreamConfig kStreamConfigs[] = {{"probe_stream_c2_u4", 2, 4},
                                             {"probe_stream_c4_u4", 4, 4},
                                             {"probe_stream_c8_u2", 8, 2},
                                             {"probe_stream_c8_u4", 8, 4},
                                             {"probe_stream_c4_u8", 4, 8}};
  for (const StreamConfig& c : kStreamConfigs) {
    auto read = [&](int i) {
      const ernie::cuda::AwqWeightsView v = w.Awq(i, s);
      return Check(ernie::bench::LaunchStreamRead(v.packed, w.packed_words * 4, v.records, w.record_words * 4,
                                                  c.ctas_per_sm, c.unroll, sink, stream),
                   c.name);
    };
    ERNIE_ASSIGN_OR_RETURN(double us, ernie::bench::TimeLaunchesInGraph(stream, w.copies, reps, read));
    emit(c.name, 1, us, weight_bytes, 0, -1);
  }
  struct WalkConfig {
    const char* name;
    bool stage_and_reduce, dequantize;
  };
  constexpr WalkConfig kWalkConfigs[] = {{"probe_awq_walk", false, false},
                                         {"probe_awq_walk_stage", true, false},
                                         {"probe_awq_walk_stage_dequant", true, true}};
  for (const WalkConfig& c : kWalkConfigs) {
    auto walk = [&](int i) {
      return Check(ernie::bench::LaunchAwqWalk({.w = w.Awq(i, s),
                                                .x = x,
                                                .y = y,
                                                .k_slices = k_slices,
                                                .stage_and_reduce = c.stage_and_reduce,
                                                .dequantize = c.dequantize,
                                                .sink = sink},
                                               stream),
                   c.name);
    };
    ERNIE_ASSIGN_OR_RETURN(double us, ernie::bench::TimeLaunchesInGraph(stream, w.copies, reps, walk));
    emit(c.name, 1, us, weight_bytes, 0, -1);
  }
  return absl::OkStatus();
}

// One line per (shape, m) on stderr: each path's time and fraction of the
// HBM floor, for reading the switch points off.
void PrintSummary(const std::vector<Result>& results) {
  auto find = [&](const std::string& kernel, const std::string& shape, int m) -> const Result* {
    for (const Result& r : results)
      if (r.kernel == kernel && r.shape == shape && r.m == m) return &r;
    return nullptr;
  };
  std::cerr << absl::StrFormat("%-16s %4s | %-14s | %-20s | %-20s | %-20s | %-20s | %-20s | %-16s\n", "shape",
                               "m", "cublas_bf16 us", "small_batch us (hbm)", "gemv_bf16 us (hbm)",
                               "awq_gemv us (hbm)", "awq_gemv_bulk (hbm)", "awq_small_batch (hbm)", "awq_dq+cublas us");
  for (const Result& c : results) {
    if (c.kernel != "cublas_bf16") continue;
    auto cell = [&](const char* kernel) {
      const Result* r = find(kernel, c.shape, c.m);
      return r == nullptr ? std::string("-") : absl::StrFormat("%8.2f (%.2f)", r->us, r->hbm_fraction);
    };
    const Result* dq = find("awq_dequant_cublas", c.shape, c.m);
    std::cerr << absl::StrFormat("%-16s %4d | %8.2f (%.2f) | %-20s | %-20s | %-20s | %-20s | %-20s | %s\n", c.shape,
                                 c.m, c.us, c.hbm_fraction, cell("small_batch_gemm"), cell("gemv_bf16"),
                                 cell("awq_gemv"), cell("awq_gemv_bulk"), cell("awq_small_batch_gemm"),
                                 dq == nullptr ? std::string("-") : absl::StrFormat("%8.2f", dq->us));
  }
  for (const Result& r : results)
    if (r.kernel.rfind("probe_", 0) == 0)
      std::cerr << absl::StrFormat("%-16s %4d | %-20s %8.2f us (%.2f; %.2f)\n", r.shape, r.m, r.kernel, r.us,
                                   r.hbm_fraction, r.device_peak_fraction);
}

absl::Status Run(const Args& args, std::ostream* log) {
  std::vector<Result> results;
  const int reps = args.reps;
  cudaStream_t stream = nullptr;
  ERNIE_RETURN_IF_ERROR(Check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream"));
  ERNIE_ASSIGN_OR_RETURN(auto gemm, ernie::cuda::Gemm::Create(stream));
  std::mt19937 gen(2026);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  const double device_peak = DevicePeakBytesPerSecond();
  std::cerr << absl::StrFormat("ernie-bench-gemv: this card's peak DRAM bandwidth %.2f TB/s (fractions in brackets: of "
                               "4.3 TB/s; the probes' second: of this card's)\n",
                               device_peak / 1e12);
  for (const Shape& s : kShapes) {
    if (!args.shape.empty() && args.shape != s.name) continue;
    ERNIE_ASSIGN_OR_RETURN(Weights w, MakeWeights(s, gen));
    const int bf16_copies = CopiesFor(int64_t{2} * s.n * s.k);
    std::vector<uint16_t> x_host(static_cast<size_t>(kMaxM) * s.k);
    for (auto& v : x_host) v = ernie::FloatToBf16(unit(gen));
    ERNIE_ASSIGN_OR_RETURN(auto x, Replicate(x_host, 1, "x"));
    ERNIE_ASSIGN_OR_RETURN(auto y, DeviceBuffer<float>::Allocate(static_cast<size_t>(kMaxM) * s.n, "y"));
    ERNIE_ASSIGN_OR_RETURN(auto y_ref, DeviceBuffer<float>::Allocate(static_cast<size_t>(kMaxM) * s.n, "y_ref"));
    DeviceBuffer<uint16_t> dequant;
    if (s.awq) {
      ERNIE_ASSIGN_OR_RETURN(dequant, DeviceBuffer<uint16_t>::Allocate(
                                          ernie::cuda::AwqDequantWorkspaceBytes(s.n, s.k) / 2, "dequant workspace"));
    }
    ERNIE_ASSIGN_OR_RETURN(auto sink, DeviceBuffer<uint32_t>::Allocate(1, "probe sink"));
    const auto* xb = reinterpret_cast<const __nv_bfloat16*>(x.data());
    auto* wsb = reinterpret_cast<__nv_bfloat16*>(dequant.data());
    const double awq_weight_bytes =
        static_cast<double>(s.k) * s.n / 2 + static_cast<double>(s.k) / kAwqGroup * s.n * 2.5;
    auto dequantize = [&](int i) {
      return Check(
          ernie::cuda::LaunchAwqDequantize({.w = w.Awq(i, s), .out = wsb, .out_bytes = dequant.bytes()}, stream),
          "awq dequantize");
    };
    auto emit = [&](const char* kernel, int m, double us, double weight_bytes, double cublas_us, double err) {
      const double bytes = weight_bytes + 2.0 * m * s.k + 4.0 * m * s.n;
      nlohmann::json j = {{"kernel", kernel},
                          {"shape", s.name},
                          {"k", s.k},
                          {"n", s.n},
                          {"m", m},
                          {"time_us", us},
                          {"bytes", bytes},
                          {"gb_s", bytes / us / 1e3},
                          {"hbm_fraction", bytes / (us * 1e-6) / kHbmBytesPerSecond}};
      if (device_peak > 0) j["device_peak_fraction"] = bytes / (us * 1e-6) / device_peak;
      if (s.awq && std::string(kernel).rfind("awq", 0) == 0) j["group"] = kAwqGroup;
      if (cublas_us > 0) j["speedup_vs_cublas_bf16"] = cublas_us / us;
      if (err >= 0) j["check_rel_err"] = err;
      std::cout << j.dump() << std::endl;
      if (log != nullptr) *log << j.dump() << "\n";
      results.push_back({kernel, s.name, m, us, j["hbm_fraction"].get<double>(),
                         device_peak > 0 ? j["device_peak_fraction"].get<double>() : 0.0});
    };
    if (s.awq) {
      ERNIE_ASSIGN_OR_RETURN(double us, ernie::bench::TimeLaunchesInGraph(stream, w.copies, reps, dequantize));
      emit("awq_dequant", 0, us, awq_weight_bytes, 0, -1);
      ERNIE_RETURN_IF_ERROR(TimeReadProbes(w, s, awq_weight_bytes, xb, y.data(), args.k_slices, reps, stream,
                                            sink.data(), emit));
    }
    for (int m : args.ms) {
      auto cublas = [&](int i) {
        return gemm.Run(x.data(), m, s.k, w.Bf16(i % bf16_copies, s), s.n, y.data(), ernie::cuda::GemmOutput::kF32);
      };
      ERNIE_ASSIGN_OR_RETURN(double cublas_us, ernie::bench::TimeLaunchesInGraph(stream, bf16_copies, reps, cublas));
      emit("cublas_bf16", m, cublas_us, 2.0 * s.n * s.k, 0, -1);
      const size_t out_count = static_cast<size_t>(m) * s.n;
      // Each launch a programmatic dependent of the one before, as between a decode graph's linears.
      if (m <= ernie::cuda::kSmallBatchGemmMaxRows && ernie::cuda::SmallBatchGemmSupports(s.n, s.k)) {
        auto small_batch = [&](int i) {
          return Check(ernie::cuda::LaunchSmallBatchGemm(
                           {.x = xb,
                            .w = reinterpret_cast<const __nv_bfloat16*>(w.Bf16(i % bf16_copies, s)),
                            .y = y.data(),
                            .m = m,
                            .n = s.n,
                            .k = s.k},
                           stream),
                       "small_batch_gemm");
        };
        ERNIE_RETURN_IF_ERROR(cublas(0));
        ERNIE_RETURN_IF_ERROR(
            Check(cudaMemcpyAsync(y_ref.data(), y.data(), out_count * 4, cudaMemcpyDeviceToDevice, stream), "copy"));
        ERNIE_RETURN_IF_ERROR(small_batch(0));  // also the first launch of its row bucket, outside the graph
        ERNIE_RETURN_IF_ERROR(Check(cudaStreamSynchronize(stream), "small_batch_gemm check"));
        ERNIE_ASSIGN_OR_RETURN(double err, RelErr(y.data(), y_ref.data(), out_count));
        ERNIE_ASSIGN_OR_RETURN(double us, ernie::bench::TimeLaunchesInGraph(stream, bf16_copies, reps, small_batch));
        emit("small_batch_gemm", m, us, 2.0 * s.n * s.k, cublas_us, err);
      }
      if (s.bf16_kernel && m <= ernie::cuda::kGemvMaxRows) {
        auto gemv = [&](int i) {
          const ernie::cuda::GemvBf16Params p{.x = xb,
                                              .w = reinterpret_cast<const __nv_bfloat16*>(w.Bf16(i % bf16_copies, s)),
                                              .y = y.data(),
                                              .m = m,
                                              .n = s.n,
                                              .k = s.k,
                                              .k_slices = args.k_slices};
          return Check(ernie::cuda::LaunchGemvBf16(p, stream), "gemv_bf16");
        };
        ERNIE_RETURN_IF_ERROR(cublas(0));
        ERNIE_RETURN_IF_ERROR(
            Check(cudaMemcpyAsync(y_ref.data(), y.data(), out_count * 4, cudaMemcpyDeviceToDevice, stream), "copy"));
        ERNIE_RETURN_IF_ERROR(gemv(0));
        ERNIE_RETURN_IF_ERROR(Check(cudaStreamSynchronize(stream), "gemv check"));
        ERNIE_ASSIGN_OR_RETURN(double err, RelErr(y.data(), y_ref.data(), out_count));
        ERNIE_ASSIGN_OR_RETURN(double us, ernie::bench::TimeLaunchesInGraph(stream, bf16_copies, reps, gemv));
        emit("gemv_bf16", m, us, 2.0 * s.n * s.k, cublas_us, err);
      }
      if (!s.awq) continue;
      auto dequant_cublas = [&](int i) {
        ERNIE_RETURN_IF_ERROR(dequantize(i));
        return gemm.Run(x.data(), m, s.k, dequant.data(), s.n, y.data(), ernie::cuda::GemmOutput::kF32);
      };
      ERNIE_RETURN_IF_ERROR(dequant_cublas(0));
      ERNIE_RETURN_IF_ERROR(
          Check(cudaMemcpyAsync(y_ref.data(), y.data(), out_count * 4, cudaMemcpyDeviceToDevice, stream), "copy"));
      ERNIE_ASSIGN_OR_RETURN(double dq_us, ernie::bench::TimeLaunchesInGraph(stream, w.copies, reps, dequant_cublas));
      emit("awq_dequant_cublas", m, dq_us, awq_weight_bytes, cublas_us, -1);
      if (m <= ernie::cuda::kSmallBatchGemmMaxRows && ernie::cuda::SmallBatchGemmSupports(s.n, s.k)) {
        // Checked against dequantise + cuBLAS (y_ref above): the same bf16 weights.
        auto awq_small_batch = [&](int i) {
          return Check(
              ernie::cuda::LaunchSmallBatchGemm({.x = xb, .awq = w.Awq(i, s), .y = y.data(), .m = m, .n = s.n, .k = s.k},
                                                stream),
              "awq_small_batch_gemm");
        };
        ERNIE_RETURN_IF_ERROR(awq_small_batch(0));  // also the first launch of its row bucket, outside the graph
        ERNIE_RETURN_IF_ERROR(Check(cudaStreamSynchronize(stream), "awq_small_batch_gemm check"));
        ERNIE_ASSIGN_OR_RETURN(double err, RelErr(y.data(), y_ref.data(), out_count));
        ERNIE_ASSIGN_OR_RETURN(double us, ernie::bench::TimeLaunchesInGraph(stream, w.copies, reps, awq_small_batch));
        emit("awq_small_batch_gemm", m, us, awq_weight_bytes, cublas_us, err);
      }
      if (m > ernie::cuda::kGemvMaxRows) continue;
      // The int4 GEMV with each k loop (the bulk-copy one for m <= 8: AwqGemvLoop).
      for (const auto loop : {ernie::cuda::AwqGemvLoop::kAuto, ernie::cuda::AwqGemvLoop::kBulkCopy}) {
        if (loop == ernie::cuda::AwqGemvLoop::kBulkCopy && m > 8) continue;
        const char* name = loop == ernie::cuda::AwqGemvLoop::kAuto ? "awq_gemv" : "awq_gemv_bulk";
        auto awq = [&](int i) {
          return Check(ernie::cuda::LaunchAwqGemv(
                           {.x = xb, .w = w.Awq(i, s), .y = y.data(), .m = m, .k_slices = args.k_slices, .loop = loop},
                           stream),
                       name);
        };
        ERNIE_RETURN_IF_ERROR(awq(0));
        ERNIE_RETURN_IF_ERROR(Check(cudaStreamSynchronize(stream), name));
        ERNIE_ASSIGN_OR_RETURN(double err, RelErr(y.data(), y_ref.data(), out_count));
        ERNIE_ASSIGN_OR_RETURN(double us, ernie::bench::TimeLaunchesInGraph(stream, w.copies, reps, awq));
        emit(name, m, us, awq_weight_bytes, cublas_us, err);
      }
    }
  }
  cudaStreamDestroy(stream);
  PrintSummary(results);
  return absl::OkStatus();
}

bool Parse(int argc, char** argv, Args* a) {
  if (argc % 2 == 0) return false;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--log") {
      a->log = value;
    } else if (flag == "--shape") {
      a->shape = value;
    } else if (flag == "--k-slices") {
      if (!absl::SimpleAtoi(value, &a->k_slices) || a->k_slices < 0 || a->k_slices > 8) return false;
    } else if (flag == "--reps") {
      if (!absl::SimpleAtoi(value, &a->reps) || a->reps <= 0) return false;
    } else if (flag == "--ms") {
      if (!ernie::bench::ParsePositiveIntList(value, &a->ms, kMaxM)) return false;
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!Parse(argc, argv, &args)) {
    std::cerr << "usage: ernie-bench-gemv [--log FILE] [--reps N] [--shape NAME] [--ms 1,8] [--k-slices 1|2|4|8] (m <= "
              << kMaxM << ")\n";
    return 2;
  }
  std::ofstream log;
  if (!args.log.empty()) log.open(args.log);
  const absl::Status status = Run(args, args.log.empty() ? nullptr : &log);
  if (!status.ok()) {
    std::cerr << "ernie-bench-gemv: " << status << "\n";
    return 1;
  }
  return 0;
}
