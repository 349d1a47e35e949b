// ernie-bench-cuda: prefill and decode speed of the CUDA backend on a model
// directory (the 0.3b shape for the figures we quote), prompt P / output D
// tokens per sequence, for several batch sizes; plus a check of its logits
// against the CPU float32 reference on the same model (teacher-forced, one
// sequence), so the speed is quoted for a backend shown correct on that shape.
//
//   ernie-bench-cuda --model DIR [--batch-sizes 1,16,64,256] [--prompt-len 128]
//                    [--decode-tokens 128] [--check-tokens 64] [--profile-batch B] [--profile-prefill P]
//                    [--max-attention-splits 32] [--fused-decode 1] [--fused-decode-max-rows -1]
//                    [--decode-attention-swap-ab 1]
//                    [--decode-linear-single-wave 1]
//                    [--log FILE]
//                    [--load-format auto|dummy] [--moe-max-tile-rows 0]
//                    [--moe-grouped-gemm-min-rows 0] [--moe-awq-gemv-k-slices 0] [--moe-awq-gemv-cta-warps 0] [--moe-awq-gemv-lean 0] [--moe-route-cluster 1]
//                    [--moe-fold-routing 1] [--moe-router-record-cluster 16] [--moe-fold-prefetch-shared 0]
//                    [--moe-fold-prefetch-down 0]
//                    [--kv-prefetch-max-seqs 0] [--stream-kv-min-items 0]
//                    [--moe-early-shared 0]
//                    [--cluster-decode-max-rows 0] [--small-batch-gemm-max-rows 64]
//                    [--awq-tiled-gemm-max-rows 0] [--awq-tiled-gemm-tile-rows 64] [--small-batch-lm-head-max-rows -1]
//                    [--awq-small-batch-gemm-max-rows -1] [--awq-small-batch-gemm-min-rows 16]
//                    [--timeline-batches 1,64] [--mixed-steps 256:14,0:16]
//                    [--unsplit-attention-max-context 256] [--wide-decode-attention-max-pairs -1]
//
// --mixed-steps D:P times serving-shaped steps: D decode rows beside P whole
// prompts of --prompt-len tokens (eager, as the worker runs a step of ~2,048
// tokens), then breaks one down by kernel through CUPTI.
//
// --load-format dummy reads only DIR/config.json and makes random weights on
// the device (the 21B-A3B shape is 43.7 GB: ernie-make-model --config-only
// writes such a directory); the CPU check is then skipped.
//
// --max-attention-splits 1 and --fused-decode 0 run the backend as it was
// before split-KV attention and the fused decode kernels (the "before" of a
// same-run comparison); --fused-decode-max-rows 8 runs every decode step
// of up to 8 tokens on the fused kernels (the before of the per-model
// default, v19); --cluster-decode-max-rows 64 runs steps of 9 - 64
// tokens on the cluster decode kernel (off by default: slower so far);
// --decode-attention-swap-ab 0 runs decode attention on the general
// tensor-core kernel's decode shape (the before of the swap-AB kernel);
// --decode-linear-single-wave 0 one row pair a warp in the fused decode
// linear however many CTAs that takes (the before of two where it pays);
// --persistent-decode 1 runs batch-1 steps as the persistent decode kernel
// (off by default, as in the backend); --fast-greedy 0 samples greedy rows
// with the sampling kernel, the before of kernels/greedy_rows.h;
// --norm-epilogues 0 keeps the residual
// add + RMSNorm kernels between the small-batch GEMMs (the before of the
// split norms);
// --small-batch-gemm-max-rows 0 cuBLAS for every unfused bf16 linear (the
// before of the small-batch GEMM); --unsplit-attention-max-context 0
// splits attention by the item count however short the contexts (the before
// of unsplit short-context steps; on MoE models with
// --wide-decode-attention-max-pairs 0 too); --wide-decode-attention-max-pairs N puts
// decode steps of at most N (sequence, KV head) pairs and contexts of at most
// 256 keys on the wide decode attention kernel, unsplit (0: off, the before;
// -1, the default: by model);
// --awq-tiled-gemm-max-rows N puts an AWQ
// model's steps of 17 - N tokens on the tiled int4 GEMM in slot tiles of
// --awq-tiled-gemm-tile-rows (0, the default: dequantise + cuBLAS);
// --awq-small-batch-gemm-max-rows N puts an AWQ model's steps of
// --awq-small-batch-gemm-min-rows (16) - N tokens on the small-batch GEMM
// with int4 weights (0: off; -1, the default: 64 on dense models, off on MoE);
// --small-batch-lm-head-max-rows N runs lm_head of up to N rows on the
// small-batch GEMM rather than cuBLAS (0: cuBLAS, the before; -1, the default:
// 32 on dense models, 0 on MoE).
//
// A decode step is timed three ways over the same positions: Forward for B
// tokens, copying B rows of float32 logits to the host ("host logits", the
// v2 path; host sampling cost not included); ForwardAndSample with every row
// sampled on the GPU, greedy ("device greedy") and seeded temperature 0.8 /
// top_p 0.8, the released models' defaults ("device top-p"), so only token
// ids cross to the host; and with no logit rows at all. Then top-p with
// repetition_penalty 1.1 (the Chainlit app's) two ways: edited on the device
// ("rep-penalty device", engine/sample/logit_edit.h), and on the host, the
// logits copied out by Forward and the host Sampler run on them ("host
// sampler", host sampling included: what such rows cost before the device
// edited them, and what a backend without device sampling pays). The next tokens are
// fixed pseudo-random ids either way, so every run writes the same cache.
// Times are host wall clock around the call, which synchronizes the stream
// before returning.
//
// --engine-streams S,... [--engine-rounds 2]: S requests of prompt_len +
// decode_tokens through EngineCore, one step at a time and with overlapped
// steps, alternating (engine_streams.h): what the engine's own host work
// costs and how much of it overlap hides.
//
// --timeline-batches B,...: after the figures, one greedy decode step of each
// batch (context prompt_len + 64) recorded through CUPTI (kernel_timeline.h):
// which kernel, how long, how much of the step's critical path, as the graph
// runs them. CUPTI is enabled from the start, so run it in a process of its
// own (with --batch-sizes 1 --decode-tokens 8) when the figures matter.
#include <cuda_profiler_api.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/sample/logit_edit.h"
#include "engine/sample/sampler.h"
#include "nlohmann/json.hpp"
#include "tools/bench/engine_streams.h"
#include "tools/bench/cuda/int_list_flag.h"
#if ERNIE_HAVE_CUPTI
#include "tools/bench/cuda/kernel_timeline.h"
#endif

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string model, log;
  std::vector<int> batch_sizes = {1, 16, 64, 256};
  int prompt_len = 128, decode_tokens = 128, check_tokens = 64;
  int profile_batch = 0;  // > 0: after the figures, one decode step of this batch inside cudaProfilerStart/Stop
  int profile_prefill = 0;  // > 0: then one prefill step of this many prompts, the same way
  int max_attention_splits = ernie::CudaBackendOptions{}.max_attention_splits;  // 1: split-KV off (the before)
  // 0: split-KV by the item count alone, however short the contexts (the before)
  int64_t unsplit_attention_max_context = ernie::CudaBackendOptions{}.unsplit_attention_max_context;
  int wide_decode_attention_max_pairs = ernie::CudaBackendOptions{}.wide_decode_attention_max_pairs;
  // -1: the model's default; 0 (--fused-decode 0): cuBLAS for decode steps too (the before)
  int fused_decode_max_rows = ernie::CudaBackendOptions{}.fused_decode_max_rows;
  int decode_attention_swap_ab = 1;  // 0: the general kernel's decode shape (the before)
  int persistent_decode = 0;  // 1: batch-1 steps as the persistent decode kernel
  int norm_epilogues = 1;     // 0: the norm kernels between small-batch GEMMs (the before)
  int fast_greedy = 1;        // 0: greedy rows on the sampling kernel (the before of greedy_rows.h)
  int decode_linear_single_wave = 1;  // 0: one row pair a warp in the fused decode linear (the before)
  // 64: steps of 9 - 64 tokens on the cluster decode kernel (the backend's default: off)
  int cluster_decode_max_rows = ernie::CudaBackendOptions{}.cluster_decode_max_rows;
  int tensor_core_attention = 1;  // 0: the CUDA-core attention kernel (the before)
  // 0: cuBLAS for the bf16 linears of unfused steps of up to 64 tokens (the before)
  int small_batch_gemm_max_rows = ernie::CudaBackendOptions{}.small_batch_gemm_max_rows;
  // AWQ steps of 17 up to N tokens on the tiled int4 GEMM, in slot tiles of R (0: dequantise + cuBLAS)
  int awq_tiled_gemm_max_rows = ernie::CudaBackendOptions{}.awq_tiled_gemm_max_rows;
  int awq_tiled_gemm_tile_rows = ernie::CudaBackendOptions{}.awq_tiled_gemm_tile_rows;
  // AWQ steps of min - max tokens on the small-batch GEMM with int4 weights (max 0: off)
  int awq_small_batch_gemm_max_rows = ernie::CudaBackendOptions{}.awq_small_batch_gemm_max_rows;
  int awq_small_batch_gemm_min_rows = ernie::CudaBackendOptions{}.awq_small_batch_gemm_min_rows;
  int small_batch_lm_head_max_rows = ernie::CudaBackendOptions{}.small_batch_lm_head_max_rows;
  std::string load_format = "auto";
  int moe_max_tile_rows = ernie::CudaBackendOptions{}.moe_max_tile_rows;
  int moe_shared_gemm_min_tokens = static_cast<int>(ernie::CudaBackendOptions{}.moe_shared_gemm_min_tokens);
  // -1: routed experts through the grouped GEMVs at every tile size (the before); 0: the backend's choice
  int moe_grouped_gemm_min_rows = ernie::CudaBackendOptions{}.moe_grouped_gemm_min_rows;
  int moe_awq_gemv_k_slices = ernie::CudaBackendOptions{}.moe_awq_gemv_k_slices;
  int moe_awq_gemv_cta_warps = ernie::CudaBackendOptions{}.moe_awq_gemv_cta_warps;
  int moe_route_cluster = ernie::CudaBackendOptions{}.moe_route_cluster ? 1 : 0;
  int moe_fold_routing = ernie::CudaBackendOptions{}.moe_fold_routing ? 1 : 0;
  int moe_router_record_cluster = ernie::CudaBackendOptions{}.moe_router_record_cluster;
  int moe_fold_prefetch_shared = ernie::CudaBackendOptions{}.moe_fold_prefetch_shared ? 1 : 0;
  int moe_fold_prefetch_down = ernie::CudaBackendOptions{}.moe_fold_prefetch_down ? 1 : 0;
  int kv_prefetch_max_seqs = ernie::CudaBackendOptions{}.kv_prefetch_max_seqs;
  int stream_kv_min_items = ernie::CudaBackendOptions{}.stream_kv_min_items;
  int lm_head_gemm_tuning = ernie::CudaBackendOptions{}.lm_head_gemm_tuning ? 1 : 0;
  int moe_awq_gemv_lean = ernie::CudaBackendOptions{}.moe_awq_gemv_lean ? 1 : 0;
  int moe_early_shared = ernie::CudaBackendOptions{}.moe_early_shared_experts;
  std::vector<int> timeline_batches;  // --timeline-batches: in-graph kernel timelines of these decode steps
  // --engine-streams: that many requests through EngineCore, one step at a
  // time against overlapped steps (engine_streams.h), --engine-rounds times each.
  std::vector<int> engine_streams;
  int engine_rounds = 2;
  // --mixed-steps D:P,...: steps of D decode rows beside P whole prompts (a serving step when a wave of
  // requests arrives), timed and, where CUPTI is built, broken down by kernel.
  std::vector<std::pair<int, int>> mixed_steps;
};

// "256:14,0:16" -> {{256, 14}, {0, 16}}: decode rows (>= 0) and prompts (>= 0), not both 0.
bool ParseMixedSteps(const std::string& text, std::vector<std::pair<int, int>>* out) {
  out->clear();
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    std::vector<absl::string_view> dp = absl::StrSplit(part, ':');
    int d = 0, p = 0;
    if (dp.size() != 2 || !absl::SimpleAtoi(dp[0], &d) || !absl::SimpleAtoi(dp[1], &p) || d < 0 || p < 0 ||
        d + p == 0)
      return false;
    out->emplace_back(d, p);
  }
  return !out->empty();
}

bool Parse(int argc, char** argv, Args* a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i], v = argv[i + 1];
    if (f == "--model") {
      a->model = v;
    } else if (f == "--log") {
      a->log = v;
    } else if (f == "--load-format") {
      a->load_format = v;
    } else if (f == "--moe-shared-gemm-min-tokens") {
      if (!absl::SimpleAtoi(v, &a->moe_shared_gemm_min_tokens) || a->moe_shared_gemm_min_tokens < 1) return false;
    } else if (f == "--moe-grouped-gemm-min-rows") {
      if (!absl::SimpleAtoi(v, &a->moe_grouped_gemm_min_rows)) return false;
    } else if (f == "--moe-awq-gemv-k-slices") {
      if (!absl::SimpleAtoi(v, &a->moe_awq_gemv_k_slices)) return false;  // the backend says which values
    } else if (f == "--moe-awq-gemv-lean") {
      if (!absl::SimpleAtoi(v, &a->moe_awq_gemv_lean) || (a->moe_awq_gemv_lean != 0 && a->moe_awq_gemv_lean != 1))
        return false;
    } else if (f == "--moe-route-cluster") {
      if (!absl::SimpleAtoi(v, &a->moe_route_cluster) || (a->moe_route_cluster != 0 && a->moe_route_cluster != 1))
        return false;
    } else if (f == "--moe-fold-routing") {
      if (!absl::SimpleAtoi(v, &a->moe_fold_routing) || (a->moe_fold_routing != 0 && a->moe_fold_routing != 1))
        return false;
    } else if (f == "--moe-router-record-cluster") {
      if (!absl::SimpleAtoi(v, &a->moe_router_record_cluster)) return false;  // the backend says which values
    } else if (f == "--moe-fold-prefetch-shared") {
      if (!absl::SimpleAtoi(v, &a->moe_fold_prefetch_shared) ||
          (a->moe_fold_prefetch_shared != 0 && a->moe_fold_prefetch_shared != 1))
        return false;
    } else if (f == "--moe-fold-prefetch-down") {
      if (!absl::SimpleAtoi(v, &a->moe_fold_prefetch_down) ||
          (a->moe_fold_prefetch_down != 0 && a->moe_fold_prefetch_down != 1))
        return false;
    } else if (f == "--kv-prefetch-max-seqs") {
      if (!absl::SimpleAtoi(v, &a->kv_prefetch_max_seqs)) return false;  // the backend says which values
    } else if (f == "--stream-kv-min-items") {
      if (!absl::SimpleAtoi(v, &a->stream_kv_min_items)) return false;  // likewise
    } else if (f == "--lm-head-gemm-tuning") {
      if (!absl::SimpleAtoi(v, &a->lm_head_gemm_tuning) || (a->lm_head_gemm_tuning != 0 && a->lm_head_gemm_tuning != 1))
        return false;
    } else if (f == "--moe-early-shared") {
      if (!absl::SimpleAtoi(v, &a->moe_early_shared)) return false;  // the backend says which values
    } else if (f == "--moe-awq-gemv-cta-warps") {
      if (!absl::SimpleAtoi(v, &a->moe_awq_gemv_cta_warps)) return false;  // likewise
    } else if (f == "--moe-max-tile-rows") {
      if (!absl::SimpleAtoi(v, &a->moe_max_tile_rows)) return false;
    } else if (f == "--timeline-batches") {
      if (!ernie::bench::ParsePositiveIntList(v, &a->timeline_batches)) return false;
    } else if (f == "--engine-streams") {
      if (!ernie::bench::ParsePositiveIntList(v, &a->engine_streams)) return false;
    } else if (f == "--engine-rounds") {
      if (!absl::SimpleAtoi(v, &a->engine_rounds) || a->engine_rounds <= 0) return false;
    } else if (f == "--mixed-steps") {
      if (!ParseMixedSteps(v, &a->mixed_steps)) return false;
    } else if (f == "--batch-sizes") {
      if (!ernie::bench::ParsePositiveIntList(v, &a->batch_sizes)) return false;
    } else if (f == "--prompt-len") {
      if (!absl::SimpleAtoi(v, &a->prompt_len) || a->prompt_len <= 0) return false;
    } else if (f == "--decode-tokens") {
      if (!absl::SimpleAtoi(v, &a->decode_tokens) || a->decode_tokens <= 0) return false;
    } else if (f == "--profile-prefill") {
      if (!absl::SimpleAtoi(v, &a->profile_prefill) || a->profile_prefill < 0) return false;
    } else if (f == "--profile-batch") {
      if (!absl::SimpleAtoi(v, &a->profile_batch) || a->profile_batch < 0) return false;
    } else if (f == "--max-attention-splits") {
      if (!absl::SimpleAtoi(v, &a->max_attention_splits) || a->max_attention_splits <= 0) return false;
    } else if (f == "--decode-attention-swap-ab") {
      if (!absl::SimpleAtoi(v, &a->decode_attention_swap_ab) || a->decode_attention_swap_ab < 0 ||
          a->decode_attention_swap_ab > 1)
        return false;
    } else if (f == "--fast-greedy") {
      if (!absl::SimpleAtoi(v, &a->fast_greedy) || a->fast_greedy < 0 || a->fast_greedy > 1) return false;
    } else if (f == "--norm-epilogues") {
      if (!absl::SimpleAtoi(v, &a->norm_epilogues) || a->norm_epilogues < 0 || a->norm_epilogues > 1) return false;
    } else if (f == "--persistent-decode") {
      if (!absl::SimpleAtoi(v, &a->persistent_decode) || a->persistent_decode < 0 || a->persistent_decode > 1)
        return false;
    } else if (f == "--decode-linear-single-wave") {
      if (!absl::SimpleAtoi(v, &a->decode_linear_single_wave) || a->decode_linear_single_wave < 0 ||
          a->decode_linear_single_wave > 1)
        return false;
    } else if (f == "--fused-decode") {  // 0: --fused-decode-max-rows 0; 1: the model's default
      int on = 0;
      if (!absl::SimpleAtoi(v, &on) || on < 0 || on > 1) return false;
      a->fused_decode_max_rows = on == 1 ? -1 : 0;
    } else if (f == "--fused-decode-max-rows") {
      if (!absl::SimpleAtoi(v, &a->fused_decode_max_rows) || a->fused_decode_max_rows < -1) return false;
    } else if (f == "--cluster-decode-max-rows") {
      if (!absl::SimpleAtoi(v, &a->cluster_decode_max_rows) || a->cluster_decode_max_rows < 0) return false;
    } else if (f == "--unsplit-attention-max-context") {
      if (!absl::SimpleAtoi(v, &a->unsplit_attention_max_context) || a->unsplit_attention_max_context < 0) return false;
    } else if (f == "--wide-decode-attention-max-pairs") {
      if (!absl::SimpleAtoi(v, &a->wide_decode_attention_max_pairs) || a->wide_decode_attention_max_pairs < -1)
        return false;
    } else if (f == "--small-batch-gemm-max-rows") {
      if (!absl::SimpleAtoi(v, &a->small_batch_gemm_max_rows) || a->small_batch_gemm_max_rows < 0) return false;
    } else if (f == "--awq-tiled-gemm-max-rows") {
      if (!absl::SimpleAtoi(v, &a->awq_tiled_gemm_max_rows) || a->awq_tiled_gemm_max_rows < 0) return false;
    } else if (f == "--awq-small-batch-gemm-max-rows") {
      if (!absl::SimpleAtoi(v, &a->awq_small_batch_gemm_max_rows) || a->awq_small_batch_gemm_max_rows < -1) return false;
    } else if (f == "--awq-small-batch-gemm-min-rows") {
      if (!absl::SimpleAtoi(v, &a->awq_small_batch_gemm_min_rows) || a->awq_small_batch_gemm_min_rows < 1) return false;
    } else if (f == "--awq-tiled-gemm-tile-rows") {
      if (!absl::SimpleAtoi(v, &a->awq_tiled_gemm_tile_rows)) return false;
    } else if (f == "--small-batch-lm-head-max-rows") {
      if (!absl::SimpleAtoi(v, &a->small_batch_lm_head_max_rows) || a->small_batch_lm_head_max_rows < -1) return false;
    } else if (f == "--tensor-core-attention") {
      if (!absl::SimpleAtoi(v, &a->tensor_core_attention) || a->tensor_core_attention < 0 ||
          a->tensor_core_attention > 1)
        return false;
    } else if (f == "--check-tokens") {
      if (!absl::SimpleAtoi(v, &a->check_tokens) || a->check_tokens < 0) return false;
    } else {
      return false;
    }
  }
  return argc % 2 == 1 && !a->model.empty() && !a->batch_sizes.empty();
}

int32_t TokenFor(int64_t seq, int64_t pos, int64_t vocab) {
  return static_cast<int32_t>(3 + (seq * 7919 + pos * 104729) % (vocab - 3));
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Teacher-forced logits of one sequence on `backend`.
std::vector<float> Logits(ernie::Backend& backend, const std::vector<int32_t>& tokens, const std::vector<int32_t>& table) {
  const auto n = static_cast<int32_t>(tokens.size());
  std::vector<int32_t> pos(tokens.size()), rows(tokens.size());
  std::iota(pos.begin(), pos.end(), 0);
  std::iota(rows.begin(), rows.end(), 0);
  const ernie::SequenceSlice seq{0, n, 0, table};
  std::vector<float> logits(tokens.size() * static_cast<size_t>(backend.vocab_size()));
  const absl::Status s = backend.Forward({tokens, pos, {&seq, 1}, rows}, logits);
  if (!s.ok()) std::cerr << "ernie-bench-cuda: " << backend.name() << ": " << s << "\n";
  return logits;
}

// Max and median over positions of ||gpu - cpu|| / ||cpu||.
nlohmann::json CheckAgainstCpu(const ernie::LoadedModel& model, ernie::Backend& gpu, int tokens) {
  auto cpu = ernie::cpu::CpuBackend::Create(model, {.block_size = 16, .num_blocks = (tokens + 15) / 16,
                                                    .max_tokens_per_step = tokens});
  if (!cpu.ok()) return {{"error", std::string(cpu.status().message())}};
  std::vector<int32_t> ids(static_cast<size_t>(tokens)), table(static_cast<size_t>((tokens + 15) / 16));
  for (int i = 0; i < tokens; ++i) ids[static_cast<size_t>(i)] = TokenFor(999, i, gpu.vocab_size());
  std::iota(table.begin(), table.end(), 0);
  const auto ref = Logits(**cpu, ids, table);
  const auto got = Logits(gpu, ids, table);
  const int64_t v = gpu.vocab_size();
  std::vector<double> errs;
  for (int t = 0; t < tokens; ++t) {
    double d = 0, n = 0;
    for (int64_t i = 0; i < v; ++i) {
      const double a = got[static_cast<size_t>(t * v + i)], b = ref[static_cast<size_t>(t * v + i)];
      d += (a - b) * (a - b);
      n += b * b;
    }
    errs.push_back(std::sqrt(d / std::max(n, 1e-30)));
  }
  std::sort(errs.begin(), errs.end());
  return {{"tokens", tokens}, {"max_rel_l2", errs.back()}, {"median_rel_l2", errs[errs.size() / 2]}};
}

struct BatchResult {
  int batch = 0;
  double prefill_ms = 0, decode_ms = 0, median_step_ms = 0;
  double median_step_no_logits_ms = 0;  // the same steps asking for no logit rows (no lm_head, no copy)
  double greedy_ms = 0, median_step_greedy_ms = 0;  // ForwardAndSample, greedy rows
  double top_p_ms = 0, median_step_top_p_ms = 0;    // ForwardAndSample, temperature 0.8 / top_p 0.8, seeded
  // top-p with repetition_penalty 1.1 (the Chainlit app's): the row edited
  // on the device, against the host sampler (logits copied, host Sampler).
  double penalized_ms = 0, median_step_penalized_ms = 0;
  double host_penalized_ms = 0, median_step_host_penalized_ms = 0;
};

enum class StepKind { kHostLogits, kNoLogits, kDeviceGreedy, kDeviceTopP, kDevicePenalized, kHostPenalized };

// Each sequence's sampling state for the penalized kinds: the prompt the
// repetition penalty reads (the prefill's tokens) and the output so far.
struct PenaltyState {
  std::vector<std::shared_ptr<ernie::PromptTokenSet>> prompts;
  std::vector<std::unique_ptr<ernie::SampleLogitEdits>> edits;  // device
  std::vector<ernie::SamplerRow> host_rows;                     // host sampler
};

// decode_tokens steps of one token for each of `batch` sequences from
// position `first_pos`; returns the sorted step times (ms).
absl::StatusOr<std::vector<double>> DecodeSteps(ernie::Backend& backend, const std::vector<std::vector<int32_t>>& tables,
                                                int first_pos, int steps_to_run, StepKind kind,
                                                std::vector<float>& logits) {
  const bool with_logits = kind != StepKind::kNoLogits;
  static const ernie::SamplingParams kGreedy{.temperature = 0.0f};
  static const ernie::SamplingParams kTopP{.temperature = 0.8f, .top_p = 0.8f, .seed = 1};
  static const ernie::SamplingParams kPenalized{.temperature = 0.8f, .top_p = 0.8f, .repetition_penalty = 1.1f,
                                                .seed = 1};
  std::vector<ernie::DeviceSampleRow> sample_rows(tables.size());
  std::vector<ernie::SampledToken> sampled(tables.size());
  const auto batch = static_cast<int>(tables.size());
  const auto vocab = static_cast<int32_t>(backend.vocab_size());
  PenaltyState penalty;
  std::optional<ernie::Sampler> host_sampler;
  if (kind == StepKind::kDevicePenalized || kind == StepKind::kHostPenalized) {
    for (int s = 0; s < batch; ++s) {
      std::vector<int32_t> prompt;
      for (int p = 0; p < first_pos; ++p) prompt.push_back(TokenFor(s, p, vocab));
      penalty.prompts.push_back(std::make_shared<ernie::PromptTokenSet>(prompt));
      if (kind == StepKind::kDevicePenalized)
        penalty.edits.push_back(std::make_unique<ernie::SampleLogitEdits>(kPenalized, penalty.prompts.back().get(), vocab));
      else
        penalty.host_rows.push_back({.params = &kPenalized, .seed = 1, .prompt_tokens = penalty.prompts.back()});
    }
    auto created = ernie::Sampler::Create({.vocab_size = vocab});
    if (!created.ok()) return created.status();
    host_sampler.emplace(std::move(*created));
  }
  std::vector<const ernie::SamplerRow*> host_row_ptrs;
  for (auto& row : penalty.host_rows) host_row_ptrs.push_back(&row);
  std::vector<int32_t> ids(static_cast<size_t>(batch)), pos(static_cast<size_t>(batch)), rows(static_cast<size_t>(batch));
  std::iota(rows.begin(), rows.end(), 0);
  std::vector<ernie::SequenceSlice> seqs(static_cast<size_t>(batch));
  std::vector<double> steps;
  for (int d = 0; d < steps_to_run; ++d) {
    const int32_t p = first_pos + d;
    for (int s = 0; s < batch; ++s) {
      ids[static_cast<size_t>(s)] = TokenFor(s, p, backend.vocab_size());
      pos[static_cast<size_t>(s)] = p;
      seqs[static_cast<size_t>(s)] = {s, 1, p, tables[static_cast<size_t>(s)]};
    }
    for (int s = 0; s < batch; ++s)
      sample_rows[static_cast<size_t>(s)] = {
          .logit_row = s,
          .params = kind == StepKind::kDeviceTopP        ? &kTopP
                    : kind == StepKind::kDevicePenalized ? &kPenalized
                                                         : &kGreedy,
          .seed = 1,
          .sample_index = 0,
          .position = static_cast<uint64_t>(d),
          .edits = kind == StepKind::kDevicePenalized ? penalty.edits[static_cast<size_t>(s)].get() : nullptr};
    const auto t0 = Clock::now();
    const ernie::StepBatch step{ids, pos, seqs, with_logits ? std::span<const int32_t>(rows) : std::span<const int32_t>()};
    if (kind == StepKind::kDeviceGreedy || kind == StepKind::kDeviceTopP || kind == StepKind::kDevicePenalized) {
      if (auto st = backend.ForwardAndSample(step, {.rows = sample_rows}, sampled); !st.ok())
        return st;
    } else if (kind == StepKind::kHostPenalized) {
      // Before the device edited rows: every row's logits to the host, the host Sampler.
      if (auto st = backend.Forward(step, logits); !st.ok())
        return st;
      auto host = host_sampler->Sample(std::span(logits).first(static_cast<size_t>(batch) * static_cast<size_t>(vocab)),
                                       host_row_ptrs);
      if (!host.ok()) return host.status();
      for (int s = 0; s < batch; ++s) sampled[static_cast<size_t>(s)] = (*host)[static_cast<size_t>(s)];
    } else if (auto st = backend.Forward(step, logits); !st.ok()) {
      return st;
    }
    steps.push_back(Ms(Clock::now() - t0));
    for (int s = 0; s < batch; ++s) {  // what the engine records after each step
      const int32_t token = sampled[static_cast<size_t>(s)].token_id;
      if (kind == StepKind::kDevicePenalized) penalty.edits[static_cast<size_t>(s)]->AddOutputToken(token);
      if (kind == StepKind::kHostPenalized) penalty.host_rows[static_cast<size_t>(s)].output.Add(token);
    }
  }
  return steps;
}

// Sequences first .. first + count - 1 (block tables `tables`) prefilled
// from position 0 with prompt_len tokens each, in one Forward step, the last
// token of each a logit row.
absl::Status PrefillStep(ernie::Backend& backend, const std::vector<std::vector<int32_t>>& tables, int first,
                         int count, int prompt_len, std::vector<float>& logits) {
  std::vector<int32_t> ids, pos, rows;
  std::vector<ernie::SequenceSlice> seqs;
  for (int s = first; s < first + count; ++s) {
    seqs.push_back({static_cast<int32_t>(ids.size()), prompt_len, 0, tables[static_cast<size_t>(s)]});
    for (int p = 0; p < prompt_len; ++p) {
      ids.push_back(TokenFor(s, p, backend.vocab_size()));
      pos.push_back(p);
    }
    rows.push_back(static_cast<int32_t>(ids.size()) - 1);
  }
  return backend.Forward({ids, pos, seqs, rows}, logits);
}

// Block tables of `sequences` sequences of up to `tokens` tokens each, laid
// out back to back: sequence s owns blocks [s * b, (s + 1) * b) for b blocks
// a sequence. Every step of this benchmark (RunBatch and the profiled and
// traced steps after it) addresses the cache this way.
std::vector<std::vector<int32_t>> BackToBackTables(int sequences, int64_t tokens, int64_t block_size) {
  const int64_t blocks = (tokens + block_size - 1) / block_size;
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(sequences));
  for (int s = 0; s < sequences; ++s) {
    tables[static_cast<size_t>(s)].resize(static_cast<size_t>(blocks));
    std::iota(tables[static_cast<size_t>(s)].begin(), tables[static_cast<size_t>(s)].end(),
              static_cast<int32_t>(s * blocks));
  }
  return tables;
}

// One serving-shaped step: a token for each of sequences [0, decode_rows)
// (prompt_len tokens already cached) beside the whole prompts of sequences
// [decode_rows, decode_rows + prompts), every chunk's last row a greedy
// device-sampled row, as the engine's steps are when a wave of requests
// arrives while others decode.
absl::Status MixedStep(ernie::Backend& backend, const std::vector<std::vector<int32_t>>& tables, int decode_rows,
                       int prompts, int prompt_len) {
  static const ernie::SamplingParams kGreedy{.temperature = 0.0f};
  std::vector<int32_t> ids, pos, rows;
  std::vector<ernie::SequenceSlice> seqs;
  for (int s = 0; s < decode_rows + prompts; ++s) {
    const bool decoding = s < decode_rows;
    const int first = decoding ? prompt_len : 0, count = decoding ? 1 : prompt_len;
    seqs.push_back({static_cast<int32_t>(ids.size()), count, first, tables[static_cast<size_t>(s)]});
    for (int p = first; p < first + count; ++p) {
      ids.push_back(TokenFor(s, p, backend.vocab_size()));
      pos.push_back(p);
    }
    rows.push_back(static_cast<int32_t>(ids.size()) - 1);
  }
  std::vector<ernie::DeviceSampleRow> sample_rows;
  for (size_t r = 0; r < rows.size(); ++r)
    sample_rows.push_back({.logit_row = static_cast<int32_t>(r), .params = &kGreedy, .seed = 1});
  std::vector<ernie::SampledToken> sampled(rows.size());
  return backend.ForwardAndSample({ids, pos, seqs, rows}, {.rows = sample_rows}, sampled);
}

// Sequences [0, decode_rows) prefilled, then the mixed step twice to warm
// its shapes and `reps` times timed; the sorted wall times (ms).
absl::StatusOr<std::vector<double>> TimeMixedSteps(ernie::Backend& backend, int decode_rows, int prompts,
                                                   int prompt_len, int reps) {
  const auto tables = BackToBackTables(decode_rows + prompts, prompt_len + 1, backend.kv_shape().block_size);
  std::vector<float> logits(static_cast<size_t>(decode_rows * backend.vocab_size()));
  const int per_step = std::max<int>(1, static_cast<int>(backend.max_tokens_per_step() / prompt_len));
  for (int first = 0; first < decode_rows; first += per_step)
    if (auto st = PrefillStep(backend, tables, first, std::min(per_step, decode_rows - first), prompt_len, logits);
        !st.ok())
      return st;
  std::vector<double> walls;
  for (int rep = 0; rep < reps + 2; ++rep) {
    const auto t0 = Clock::now();
    if (auto st = MixedStep(backend, tables, decode_rows, prompts, prompt_len); !st.ok()) return st;
    if (rep >= 2) walls.push_back(Ms(Clock::now() - t0));
  }
  std::sort(walls.begin(), walls.end());
  return walls;
}

// B sequences of prompt_len tokens prefilled (as many whole prompts per step
// as fit), then decode_tokens steps of B tokens.
absl::StatusOr<BatchResult> RunBatch(ernie::Backend& backend, int batch, const Args& a) {
  const int64_t vocab = backend.vocab_size();
  const auto tables = BackToBackTables(batch, a.prompt_len + a.decode_tokens, backend.kv_shape().block_size);
  std::vector<float> logits(static_cast<size_t>(batch * vocab));
  BatchResult r{.batch = batch};
  const int per_step = std::max<int>(1, static_cast<int>(backend.max_tokens_per_step() / a.prompt_len));
  const auto prefill_start = Clock::now();
  for (int first = 0; first < batch; first += per_step)
    if (auto st = PrefillStep(backend, tables, first, std::min(per_step, batch - first), a.prompt_len, logits);
        !st.ok())
      return st;
  r.prefill_ms = Ms(Clock::now() - prefill_start);

  auto steps = DecodeSteps(backend, tables, a.prompt_len, a.decode_tokens, StepKind::kHostLogits, logits);
  if (!steps.ok()) return steps.status();
  // Again over the same positions (rewriting the same cache rows), sampling
  // on the device: the difference is the logits' copy to the host.
  for (const StepKind kind :
       {StepKind::kDeviceGreedy, StepKind::kDeviceTopP, StepKind::kDevicePenalized, StepKind::kHostPenalized}) {
    auto sampled = DecodeSteps(backend, tables, a.prompt_len, a.decode_tokens, kind, logits);
    if (!sampled.ok()) return sampled.status();
    double& total = kind == StepKind::kDeviceGreedy       ? r.greedy_ms
                    : kind == StepKind::kDeviceTopP       ? r.top_p_ms
                    : kind == StepKind::kDevicePenalized  ? r.penalized_ms
                                                          : r.host_penalized_ms;
    double& median = kind == StepKind::kDeviceGreedy       ? r.median_step_greedy_ms
                     : kind == StepKind::kDeviceTopP       ? r.median_step_top_p_ms
                     : kind == StepKind::kDevicePenalized  ? r.median_step_penalized_ms
                                                           : r.median_step_host_penalized_ms;
    total = std::accumulate(sampled->begin(), sampled->end(), 0.0);
    std::sort(sampled->begin(), sampled->end());
    median = (*sampled)[sampled->size() / 2];
  }
  // And with no logit rows: the difference is lm_head plus the copy (or the sampling).
  auto bare = DecodeSteps(backend, tables, a.prompt_len, a.decode_tokens, StepKind::kNoLogits, logits);
  if (!bare.ok()) return bare.status();
  std::sort(bare->begin(), bare->end());
  r.median_step_no_logits_ms = (*bare)[bare->size() / 2];
  r.decode_ms = std::accumulate(steps->begin(), steps->end(), 0.0);
  std::sort(steps->begin(), steps->end());
  r.median_step_ms = (*steps)[steps->size() / 2];
  return r;
}

#if ERNIE_HAVE_CUPTI
// One greedy decode step of `batch` sequences at context prompt_len + 64,
// three times; the kernels of the step with the median span, summarized.
absl::StatusOr<nlohmann::json> RecordTimeline(ernie::Backend& backend, ernie::bench::KernelTimeline& timeline,
                                              int batch, int prompt_len) {
  constexpr int kDecodeBefore = 64;  // main() sizes the pool for it
  // Prefill, then 64 decode steps: every shape involved is captured by then.
  if (auto r = RunBatch(backend, batch, {.prompt_len = prompt_len, .decode_tokens = kDecodeBefore}); !r.ok())
    return r.status();
  const auto tables = BackToBackTables(batch, prompt_len + kDecodeBefore, backend.kv_shape().block_size);
  std::vector<float> unused;
  std::vector<std::pair<double, nlohmann::json>> steps;
  for (int rep = 0; rep < 3; ++rep) {
    if (auto drop = timeline.Collect(); !drop.ok()) return drop.status();
    auto wall = DecodeSteps(backend, tables, prompt_len + kDecodeBefore - 1, 1, StepKind::kDeviceGreedy, unused);
    if (!wall.ok()) return wall.status();
    auto kernels = timeline.Collect();
    if (!kernels.ok()) return kernels.status();
    nlohmann::json summary = ernie::bench::Summarize(*kernels, /*sequence_len=*/16);
    summary["wall_ms"] = wall->front();
    const double span = summary.value("span_us", 0.0);
    steps.emplace_back(span, std::move(summary));
  }
  std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  nlohmann::json out = steps[1].second;
  out["batch"] = batch;
  out["context"] = prompt_len + kDecodeBefore;
  return out;
}

// The kernels of one mixed step (TimeMixedSteps has prefilled its decode
// rows and warmed its shapes): the median of three by span.
absl::StatusOr<nlohmann::json> RecordMixedTimeline(ernie::Backend& backend, ernie::bench::KernelTimeline& timeline,
                                                   int decode_rows, int prompts, int prompt_len) {
  const auto tables = BackToBackTables(decode_rows + prompts, prompt_len + 1, backend.kv_shape().block_size);
  std::vector<std::pair<double, nlohmann::json>> steps;
  for (int rep = 0; rep < 3; ++rep) {
    if (auto drop = timeline.Collect(); !drop.ok()) return drop.status();
    if (auto st = MixedStep(backend, tables, decode_rows, prompts, prompt_len); !st.ok()) return st;
    auto kernels = timeline.Collect();
    if (!kernels.ok()) return kernels.status();
    nlohmann::json summary = ernie::bench::Summarize(*kernels, /*sequence_len=*/0);
    const double span = summary.value("span_us", 0.0);
    steps.emplace_back(span, std::move(summary));
  }
  std::sort(steps.begin(), steps.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return steps[1].second;
}

void PrintTimeline(const nlohmann::json& t) {
  std::printf("timeline: batch %d, context %d: %zu kernels, span %.1f us (host wall %.3f ms), gaps %.1f us, "
              "sum of kernel durations %.1f us\n",
              t["batch"].get<int>(), t["context"].get<int>(), t["kernels"].get<size_t>(), t["span_us"].get<double>(),
              t["wall_ms"].get<double>(), t["gaps_us"].get<double>(), t["sum_duration_us"].get<double>());
  std::printf("  %-70s %5s %12s %12s\n", "kernel [grid x block, dynamic smem]", "count", "increment us", "duration us");
  for (const auto& k : t["by_kernel"])
    std::printf("  %-70s %5d %12.1f %12.1f\n", k["kernel"].get<std::string>().c_str(), k["count"].get<int>(),
                k["increment_us"].get<double>(), k["duration_us"].get<double>());
  std::printf("  first kernels of the step: start / duration / increment / gap (us)\n");
  for (const auto& k : t["sequence"])
    std::printf("  %-70s %8.1f %8.1f %8.1f %6.1f\n", k["kernel"].get<std::string>().c_str(), k["start_us"].get<double>(),
                k["duration_us"].get<double>(), k["increment_us"].get<double>(), k["gap_us"].get<double>());
}
#endif  // ERNIE_HAVE_CUPTI

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!Parse(argc, argv, &args)) {
    std::cerr << "usage: ernie-bench-cuda --model DIR [--batch-sizes 1,16,64,256] [--prompt-len N] "
                 "[--decode-tokens N] [--check-tokens N] [--profile-batch B] [--profile-prefill P] [--max-attention-splits N] [--fused-decode 0|1] [--fused-decode-max-rows N] [--decode-attention-swap-ab 0|1] [--decode-linear-single-wave 0|1] [--persistent-decode 0|1] [--norm-epilogues 0|1] [--fast-greedy 0|1] [--cluster-decode-max-rows N] [--small-batch-gemm-max-rows N] [--awq-tiled-gemm-max-rows N] [--awq-tiled-gemm-tile-rows 16|32|64] [--awq-small-batch-gemm-max-rows N] [--awq-small-batch-gemm-min-rows N] [--small-batch-lm-head-max-rows N] [--unsplit-attention-max-context N] "
                 "[--wide-decode-attention-max-pairs N] [--tensor-core-attention 0|1] [--log FILE] "
                 "[--load-format auto|dummy] [--moe-max-tile-rows 0|8|16|32|64] "
                 "[--moe-shared-gemm-min-tokens N] [--moe-grouped-gemm-min-rows -1|0|8|16|32|64] "
                 "[--moe-awq-gemv-k-slices 0|1|2|4|8] [--moe-awq-gemv-cta-warps 0-8] [--moe-awq-gemv-lean 0|1] [--moe-route-cluster 0|1] [--moe-early-shared 0-3] [--timeline-batches 1,64] [--mixed-steps 256:14,0:16] [--engine-streams 1,64] [--engine-rounds 2]\n"
                 "       [--moe-fold-routing 0|1] [--moe-router-record-cluster -1|1|2|4|8|16]\n"
                 "       [--moe-fold-prefetch-shared 0|1] [--moe-fold-prefetch-down 0|1]\n"
                 "       [--kv-prefetch-max-seqs N] [--stream-kv-min-items N]\n";
    return 2;
  }
  const auto load_start = Clock::now();
  auto model = ernie::LoadModel(args.model, args.load_format);
  if (model.ok() && (*model)->dummy_weights) args.check_tokens = 0;  // no weights for the CPU to run
  if (!model.ok()) {
    std::cerr << "ernie-bench-cuda: " << model.status() << "\n";
    return 1;
  }
  int max_batch = std::max({*std::max_element(args.batch_sizes.begin(), args.batch_sizes.end()),
                            args.profile_batch, args.profile_prefill});
  for (int b : args.timeline_batches) max_batch = std::max(max_batch, b);
  for (int b : args.engine_streams) max_batch = std::max(max_batch, b);
  int64_t mixed_max_tokens = 0;
  for (const auto& [d, p] : args.mixed_steps) {
    max_batch = std::max(max_batch, d + p);
    mixed_max_tokens = std::max<int64_t>(mixed_max_tokens, d + int64_t{p} * args.prompt_len);
  }
  // Before the backend: CUPTI instruments a graph's kernels when it is instantiated.
#if ERNIE_HAVE_CUPTI
  std::unique_ptr<ernie::bench::KernelTimeline> timeline;
  if (!args.timeline_batches.empty()) {
    auto started = ernie::bench::KernelTimeline::Start();
    if (!started.ok()) {
      std::cerr << "ernie-bench-cuda: " << started.status() << "\n";
      return 1;
    }
    timeline = std::move(*started);
  }
#else
  if (!args.timeline_batches.empty()) {
    std::cerr << "ernie-bench-cuda: --timeline-batches needs CUPTI, which this build's CUDA toolkit lacks\n";
    return 2;
  }
#endif
  const int64_t block = 16;
  // RecordTimeline decodes 64 tokens a sequence.
  const int decode_tokens_max = args.timeline_batches.empty() ? args.decode_tokens : std::max(args.decode_tokens, 64);
  const int64_t blocks_per_seq = (args.prompt_len + decode_tokens_max + block - 1) / block;
  const auto start = Clock::now();
  auto backend = ernie::CreateCudaBackend(
      **model, {.block_size = block,
                .num_blocks = std::max<int64_t>(max_batch * blocks_per_seq, (args.check_tokens + block - 1) / block),
                .max_tokens_per_step = std::max<int64_t>(
                    {2048, max_batch, args.check_tokens, int64_t{args.profile_prefill} * args.prompt_len,
                     mixed_max_tokens}),
                .max_logit_rows = std::max<int64_t>({max_batch, args.check_tokens, 1}),
                .max_attention_splits = args.max_attention_splits,
                .unsplit_attention_max_context = args.unsplit_attention_max_context,
                .wide_decode_attention_max_pairs = args.wide_decode_attention_max_pairs,
                .tensor_core_attention = args.tensor_core_attention == 1,
                .decode_attention_swap_ab = args.decode_attention_swap_ab == 1,
                .fused_decode_max_rows = args.fused_decode_max_rows,
                .decode_linear_single_wave = args.decode_linear_single_wave == 1,
                .cluster_decode_max_rows = args.cluster_decode_max_rows,
                .small_batch_gemm_max_rows = args.small_batch_gemm_max_rows,
                .awq_tiled_gemm_max_rows = args.awq_tiled_gemm_max_rows,
                .awq_tiled_gemm_tile_rows = args.awq_tiled_gemm_tile_rows,
                .awq_small_batch_gemm_max_rows = args.awq_small_batch_gemm_max_rows,
                .awq_small_batch_gemm_min_rows = args.awq_small_batch_gemm_min_rows,
                .small_batch_lm_head_max_rows = args.small_batch_lm_head_max_rows,
                .small_batch_norm_epilogues = args.norm_epilogues == 1,
                .persistent_decode = args.persistent_decode == 1,
                .fast_greedy_sampling = args.fast_greedy == 1,
                // Only launches overlap (the engine runs below); ForwardAndSample is unchanged.
                .overlap_steps = true,
                .moe_max_tile_rows = args.moe_max_tile_rows,
                .moe_shared_gemm_min_tokens = args.moe_shared_gemm_min_tokens,
                .moe_grouped_gemm_min_rows = args.moe_grouped_gemm_min_rows,
                .moe_awq_gemv_k_slices = args.moe_awq_gemv_k_slices,
                .moe_awq_gemv_cta_warps = args.moe_awq_gemv_cta_warps,
                .moe_awq_gemv_lean = args.moe_awq_gemv_lean == 1,
                .moe_route_cluster = args.moe_route_cluster == 1,
                .moe_early_shared_experts = args.moe_early_shared,
                .moe_fold_routing = args.moe_fold_routing == 1,
                .moe_router_record_cluster = args.moe_router_record_cluster,
                .moe_fold_prefetch_shared = args.moe_fold_prefetch_shared == 1,
                .moe_fold_prefetch_down = args.moe_fold_prefetch_down == 1,
                .kv_prefetch_max_seqs = args.kv_prefetch_max_seqs,
                .stream_kv_min_items = args.stream_kv_min_items,
                .lm_head_gemm_tuning = args.lm_head_gemm_tuning == 1});
  if (!backend.ok()) {
    std::cerr << "ernie-bench-cuda: " << backend.status() << "\n";
    return 1;
  }
  const ernie::CudaMemoryBreakdown mem = (*backend)->memory();
  nlohmann::json log = {{"model", args.model},
                        {"start_ms", Ms(Clock::now() - start)},
                        // Checkpoint read (mapped) + conversion + upload: disk (or page cache) to GPU.
                        {"load_ms", Ms(Clock::now() - load_start)},
                        {"load_gb_s", static_cast<double>(mem.weights) / 1e6 / Ms(Clock::now() - load_start)},
                        {"memory_bytes", {{"weights", mem.weights}, {"kv_cache", mem.kv_cache}, {"workspace", mem.workspace}}},
                        {"prompt_len", args.prompt_len},
                        {"load_format", args.load_format},
                        {"moe_max_tile_rows", args.moe_max_tile_rows},
                        {"moe_shared_gemm_min_tokens", args.moe_shared_gemm_min_tokens},
                        {"moe_grouped_gemm_min_rows", args.moe_grouped_gemm_min_rows},
                        {"moe_awq_gemv_k_slices", args.moe_awq_gemv_k_slices},
                        {"moe_awq_gemv_cta_warps", args.moe_awq_gemv_cta_warps},
                        {"moe_awq_gemv_lean", args.moe_awq_gemv_lean},
                        {"moe_route_cluster", args.moe_route_cluster},
                        {"moe_early_shared", args.moe_early_shared},
                        {"moe_fold_routing", args.moe_fold_routing},
                        {"moe_router_record_cluster", args.moe_router_record_cluster},
                        {"moe_fold_prefetch_shared", args.moe_fold_prefetch_shared},
                        {"moe_fold_prefetch_down", args.moe_fold_prefetch_down},
                        {"kv_prefetch_max_seqs", args.kv_prefetch_max_seqs},
                        {"stream_kv_min_items", args.stream_kv_min_items},
                        {"lm_head_gemm_tuning", args.lm_head_gemm_tuning},
                        {"architecture", (*model)->config.architecture_name},
                        {"parameters", (*model)->config.ParameterCount()},
                        // What one token reads at least (bf16): the batch-1 floor is this over HBM bandwidth.
                        {"active_weight_bytes", 2 * (*model)->config.ActiveParameterCount()},
                        {"max_attention_splits", args.max_attention_splits},
                        {"unsplit_attention_max_context", args.unsplit_attention_max_context},
                        {"wide_decode_attention_max_pairs", args.wide_decode_attention_max_pairs},
                        {"fused_decode", args.fused_decode_max_rows != 0},
                        {"fused_decode_max_rows", args.fused_decode_max_rows},
                        {"cluster_decode_max_rows", args.cluster_decode_max_rows},
                        {"small_batch_gemm_max_rows", args.small_batch_gemm_max_rows},
                        {"awq_tiled_gemm_max_rows", args.awq_tiled_gemm_max_rows},
                        {"awq_tiled_gemm_tile_rows", args.awq_tiled_gemm_tile_rows},
                        {"awq_small_batch_gemm_max_rows", args.awq_small_batch_gemm_max_rows},
                        {"awq_small_batch_gemm_min_rows", args.awq_small_batch_gemm_min_rows},
                        {"small_batch_lm_head_max_rows", args.small_batch_lm_head_max_rows},
                        {"tensor_core_attention", args.tensor_core_attention == 1},
                        {"decode_attention_swap_ab", args.decode_attention_swap_ab == 1},
                        {"decode_linear_single_wave", args.decode_linear_single_wave == 1},
                        {"persistent_decode", args.persistent_decode == 1},
                        {"norm_epilogues", args.norm_epilogues == 1},
                        {"decode_tokens", args.decode_tokens}};
  if (args.check_tokens > 0) log["check_vs_cpu"] = CheckAgainstCpu(**model, **backend, args.check_tokens);
  std::cout << "ernie-bench-cuda: " << log.dump() << "\n";
  // Warm-up: module load, cuBLAS heuristics for each shape, graph captures
  // (a step shape is captured the second time it is seen). A lone prompt's
  // prefill step is a shape of its own: without it, batch 1's prefill figure
  // carried those first-use costs (v16: 2,782 and 3,731 tok/s in two runs
  // of the same 128-token step).
  for (const int warm_batch : {1, std::min(max_batch, 4)}) {
    if (auto w = RunBatch(**backend, warm_batch, {.prompt_len = args.prompt_len, .decode_tokens = 4}); !w.ok()) {
      std::cerr << "ernie-bench-cuda: " << w.status() << "\n";
      return 1;
    }
  }
  std::cout << "batch  prefill tok/s  step ms: host logits  device greedy  device top-p  no logits"
               "  tok/s: host logits  device greedy  device top-p"
               "  | rep-penalty step ms: device  host sampler\n";
  for (int b : args.batch_sizes) {
    auto r = RunBatch(**backend, b, args);
    if (!r.ok()) {
      std::cerr << "ernie-bench-cuda: batch " << b << ": " << r.status() << "\n";
      return 1;
    }
    const double prefill_tps = b * args.prompt_len / (r->prefill_ms / 1e3);
    const double decode_tps = b * args.decode_tokens / (r->decode_ms / 1e3);
    log["batches"].push_back({{"batch", b},
                              {"prefill_ms", r->prefill_ms},
                              {"prefill_tok_s", prefill_tps},
                              {"decode_ms", r->decode_ms},
                              {"median_step_ms", r->median_step_ms},
                              {"median_step_no_logits_ms", r->median_step_no_logits_ms},
                              {"decode_tok_s", decode_tps},
                              {"median_step_greedy_ms", r->median_step_greedy_ms},
                              {"decode_greedy_tok_s", b * args.decode_tokens / (r->greedy_ms / 1e3)},
                              {"median_step_top_p_ms", r->median_step_top_p_ms},
                              {"decode_top_p_tok_s", b * args.decode_tokens / (r->top_p_ms / 1e3)},
                              {"median_step_rep_penalty_ms", r->median_step_penalized_ms},
                              {"decode_rep_penalty_tok_s", b * args.decode_tokens / (r->penalized_ms / 1e3)},
                              {"median_step_rep_penalty_host_ms", r->median_step_host_penalized_ms},
                              {"decode_rep_penalty_host_tok_s", b * args.decode_tokens / (r->host_penalized_ms / 1e3)}});
    std::printf("%5d  %13.0f  %20.3f  %13.3f  %12.3f  %9.3f  %18.0f  %13.0f  %12.0f  | %26.3f  %13.3f\n", b,
                prefill_tps, r->median_step_ms, r->median_step_greedy_ms, r->median_step_top_p_ms,
                r->median_step_no_logits_ms, decode_tps, b * args.decode_tokens / (r->greedy_ms / 1e3),
                b * args.decode_tokens / (r->top_p_ms / 1e3), r->median_step_penalized_ms,
                r->median_step_host_penalized_ms);
  }
  // What the lm_head's tuning at start timed (CudaBackendOptions::lm_head_gemm_tuning), one line.
  std::string tuned;
  for (const ernie::GemmTuning& t : (*backend)->lm_head_tunings()) {
    log["lm_head_tunings"].push_back({{"rows", t.m},
                                      {"default_us", t.default_us},
                                      {"best_us", t.best_us},
                                      {"candidates", t.candidates},
                                      {"lt_chosen", t.lt_chosen}});
    tuned += absl::StrFormat(" %d rows %.1f -> %.1f us%s;", static_cast<long long>(t.m), t.default_us, t.best_us,
                             t.lt_chosen ? "" : " (default kept)");
  }
  if (!tuned.empty()) std::printf("lm_head tuning by bucket (cuBLAS default -> kept):%s\n", tuned.c_str());
  for (int streams : args.engine_streams) {
    // An untimed run first (graph captures of the engine's step shapes), then alternating rounds.
    nlohmann::json entry = {{"streams", streams}};
    for (int round = 0; round <= args.engine_rounds; ++round)
      for (const bool overlap : {false, true}) {
        auto r = ernie::bench::RunEngineStreams(**backend, streams, args.prompt_len, args.decode_tokens, overlap);
        if (!r.ok()) {
          std::cerr << "ernie-bench-cuda: engine, " << streams << " streams: " << r.status() << "\n";
          return 1;
        }
        if (round == 0) continue;
        const char* mode = overlap ? "overlapped" : "one_at_a_time";
        entry[mode].push_back({{"tok_s", r->tok_s()},
                               {"decode_tok_s", r->decode_tok_s(streams)},
                               {"total_s", r->total_s},
                               {"steps", r->steps},
                               {"overlapped", r->overlapped}});
        std::printf("engine %3d streams, %-13s round %d: %9.0f tok/s, decode %9.0f tok/s, %lld steps%s\n", streams,
                    mode, round, r->tok_s(), r->decode_tok_s(streams), static_cast<long long>(r->steps),
                    overlap && !r->overlapped ? " (did not overlap)" : "");
      }
    log["engine_streams"].push_back(entry);
  }
  log["captured_graphs"] = (*backend)->step_counters().graph_captures;
#if ERNIE_HAVE_CUPTI
  for (int b : args.timeline_batches) {
    auto t = RecordTimeline(**backend, *timeline, b, args.prompt_len);
    if (!t.ok()) {
      std::cerr << "ernie-bench-cuda: timeline of batch " << b << ": " << t.status() << "\n";
      return 1;
    }
    PrintTimeline(*t);
    log["timelines"].push_back(*t);
  }
#endif
  // Every mixed step's wall times first, then (where CUPTI is built) one of
  // each broken down by kernel: CUPTI's records cost host time a launch.
  for (const auto& [d, p] : args.mixed_steps) {
    auto walls = TimeMixedSteps(**backend, d, p, args.prompt_len, /*reps=*/7);
    if (!walls.ok()) {
      std::cerr << "ernie-bench-cuda: mixed step " << d << ":" << p << ": " << walls.status() << "\n";
      return 1;
    }
    const double median = (*walls)[walls->size() / 2];
    const int64_t tokens = d + int64_t{p} * args.prompt_len;
    log["mixed_steps"].push_back({{"decode_rows", d},
                                  {"prompts", p},
                                  {"tokens", tokens},
                                  {"median_wall_ms", median},
                                  {"min_wall_ms", walls->front()},
                                  {"tok_s", tokens / (median / 1e3)}});
    std::printf("mixed step: %d decode rows + %d prompts of %d (%lld tokens): %.3f ms wall (min %.3f), %.0f tok/s\n",
                d, p, args.prompt_len, static_cast<long long>(tokens), median, walls->front(), tokens / (median / 1e3));
  }
#if ERNIE_HAVE_CUPTI
  for (size_t i = 0; i < args.mixed_steps.size(); ++i) {
    const auto [d, p] = args.mixed_steps[i];
    if (!timeline) {
      auto started = ernie::bench::KernelTimeline::Start();
      if (!started.ok()) {
        std::cerr << "ernie-bench-cuda: " << started.status() << "\n";
        return 1;
      }
      timeline = std::move(*started);
    }
    // The steps timed after this one laid their sequences over the same blocks: this step's
    // decode rows are prefilled again (and the step run twice, untimed) before it is traced.
    if (auto w = TimeMixedSteps(**backend, d, p, args.prompt_len, /*reps=*/0); !w.ok()) {
      std::cerr << "ernie-bench-cuda: mixed step " << d << ":" << p << ": " << w.status() << "\n";
      return 1;
    }
    auto t = RecordMixedTimeline(**backend, *timeline, d, p, args.prompt_len);
    if (!t.ok()) {
      std::cerr << "ernie-bench-cuda: timeline of mixed step " << d << ":" << p << ": " << t.status() << "\n";
      return 1;
    }
    std::printf("mixed step %d:%d by kernel: %d kernels, span %.1f us, gaps %.1f us, sum of durations %.1f us\n", d, p,
                (*t)["kernels"].get<int>(), (*t)["span_us"].get<double>(), (*t)["gaps_us"].get<double>(),
                (*t)["sum_duration_us"].get<double>());
    for (const auto& k : (*t)["by_kernel"])
      std::printf("  %-70s %5d %12.1f %12.1f\n", k["kernel"].get<std::string>().c_str(), k["count"].get<int>(),
                  k["increment_us"].get<double>(), k["duration_us"].get<double>());
    log["mixed_steps"][i]["timeline"] = *t;
  }
#endif
  if (args.profile_batch > 0) {
    // One decode step of profile_batch sequences between cudaProfilerStart
    // and Stop, for `ncu --profile-from-start off` (kernel-time breakdown).
    auto r = RunBatch(**backend, args.profile_batch, {.prompt_len = args.prompt_len, .decode_tokens = 2});
    // RunBatch's layout for prompt_len + 2 positions; the profiled step rewrites the last one.
    const auto tables = BackToBackTables(args.profile_batch, args.prompt_len + 2, block);
    std::vector<float> logits(static_cast<size_t>(args.profile_batch * (*backend)->vocab_size()));
    cudaProfilerStart();
    auto st = DecodeSteps(**backend, tables, args.prompt_len + 1, 1, StepKind::kHostLogits, logits);
    cudaProfilerStop();
    if (!r.ok() || !st.ok()) {
      std::cerr << "ernie-bench-cuda: profile step failed\n";
      return 1;
    }
  }
  if (args.profile_prefill > 0) {
    // One prefill step of profile_prefill prompts between cudaProfilerStart
    // and Stop, after the same step unprofiled (its wall time, host work
    // included, is printed: the kernel sum under ncu says how much of it the
    // GPU was busy).
    const int n = args.profile_prefill;
    const auto tables = BackToBackTables(n, args.prompt_len, block);
    std::vector<float> logits(static_cast<size_t>(n * (*backend)->vocab_size()));
    absl::Status st = PrefillStep(**backend, tables, 0, n, args.prompt_len, logits);
    const auto t0 = Clock::now();
    if (st.ok()) st = PrefillStep(**backend, tables, 0, n, args.prompt_len, logits);
    std::cout << "ernie-bench-cuda: prefill step of " << n << " x " << args.prompt_len << " tokens: "
              << Ms(Clock::now() - t0) << " ms wall\n";
    cudaProfilerStart();
    if (st.ok()) st = PrefillStep(**backend, tables, 0, n, args.prompt_len, logits);
    cudaProfilerStop();
    if (!st.ok()) {
      std::cerr << "ernie-bench-cuda: profiled prefill step failed: " << st << "\n";
      return 1;
    }
  }
  if (!args.log.empty()) std::ofstream(args.log) << log.dump(2) << "\n";
  return 0;
}
