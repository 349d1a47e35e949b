// y = x W^T for decode-sized steps (1 to kDecodeLinearMaxRows rows), with the
// work around the matrix product fused in, so a decode step of the dense
// model is six kernels a layer instead of cuBLAS's split-K GEMMs plus
// separate norm, SiLU and residual kernels:
//
//   prologue  x comes from the float32 residual stream, optionally
//             RMS-normalised per row (the layer's input or post-attention
//             norm, or the final norm on gathered logit rows), or from bf16
//             activations (the attention output);
//   epilogue  kStore         y[r, n] = dot + bias[n]                  (float32)
//             kSiluMul       y[r, j] = silu(g) * u, g and u the dots of rows j
//                            and width + j of W (gate|up), plus their biases
//             kAddResidual   y[r, n] += dot + bias[n]   (y the residual stream)
//             kRotaryKv      the fused q|k|v projection: q and k heads get the
//                            interleaved rotary embedding of row r's position
//                            (a warp's row pair (2j, 2j+1) is one rotary
//                            pair); q goes to y, k and v to the paged cache
//                            at row r's slot, in bf16 (rotary_kv_write.h's
//                            work, without its own launch)
//
// Every weight row is read once per call with 16-byte loads by one warp,
// which keeps the row's dot products for every input row in registers (no
// split-K workspace); the input rows sit in shared memory as float32.
// GEMV-bound by HBM bandwidth at these sizes, so the fusions save launches
// and activation passes, not FLOPs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/backend/cuda/kernels/moe_routing.h"
#include "engine/backend/cuda/paged_kv_view.h"

namespace ernie::cuda {

inline constexpr int32_t kDecodeLinearMaxRows = 8;

enum class DecodeEpilogue : int32_t { kStore, kSiluMul, kAddResidual, kRotaryKv };

// What kRotaryKv needs besides y ([m, n] float32; only the q columns are written).
struct DecodeRotaryKv {
  const int32_t* positions = nullptr;  // [m] absolute positions
  const int32_t* slots = nullptr;      // [m] cache slot: block * block_size + row
  const float* inv_freq = nullptr;     // [head_dim / 2], as RotaryKvWriteParams
  PagedKvView cache;                   // this layer's keys and values
  int32_t num_heads = 0;               // n = (num_heads + 2 cache.num_kv_heads) * cache.head_dim
  // Optional (CudaBackendOptions::kv_prefetch_max_seqs): the step's attention
  // items and block tables (PagedAttentionParams'), or nullptr. The launch's
  // first CTAs then ask the L2 for the keys and values of earlier steps that
  // the attention after it reads, a block's K or V a CTA, before they wait:
  // at a few sequences the attention's CTAs start only as this launch's
  // leave (the timelines: about 1 us before it ends), too late for their own
  // early loads of those keys to come from HBM in time.
  const AttentionWorkItem* prefetch_items = nullptr;
  const int32_t* prefetch_block_tables = nullptr;
  int32_t prefetch_num_items = 0;
};

struct DecodeLinearParams {
  // Input: exactly one of x_f32 / x_bf16. Row r of the input is
  // x[row_index[r]] when row_index is set, else x[r].
  const float* x_f32 = nullptr;           // [*, k] float32 (the residual stream), 16-byte aligned
  const __nv_bfloat16* x_bf16 = nullptr;  // [*, k] bf16 activations, 8-byte aligned
  const int32_t* row_index = nullptr;     // [m] or nullptr
  // [k], 16-byte aligned: RMS-normalise each input row first (x_f32 only), or nullptr
  const float* norm_weight = nullptr;
  float eps = 1e-5f;
  const __nv_bfloat16* w = nullptr;       // [n, k] bf16 (nn.Linear layout)
  const float* bias = nullptr;            // [n] or nullptr
  float* y = nullptr;                     // kStore, kAddResidual: [m, n]; kSiluMul: [m, n / 2]
  int32_t m = 0;                          // 1..kDecodeLinearMaxRows
  int32_t n = 0;                          // weight rows (even for kSiluMul: gate rows, then up rows)
  int32_t k = 0;                          // a multiple of 8
  DecodeEpilogue epilogue = DecodeEpilogue::kStore;
  DecodeRotaryKv rotary;                  // kRotaryKv only
  // Two row pairs a warp where one pair a warp would need more than one wave
  // of CTAs (and a pair is one step of a warp's loop): every CTA then starts
  // early enough to load its weights before the kernel before completes.
  // False: one pair a warp (the before of that change).
  bool single_wave = true;
  // Rows of k > 2,048 (two steps of a warp's loop) split over two warps a
  // row pair, each half of k, where twice the warps fit one wave of CTAs:
  // every weight is then requested before the kernel before completes.
  // False: one warp a pair (the before of that change).
  bool split_long_k = true;
  // The int4 kernel's kAddResidual at m = 1 only (awq_decode_linear.h): also
  // write the router records of the residual row it completes, a record per
  // cluster of the launch (moe_routing.h MoeRouterRecords; its `x` is y,
  // its `count` what AwqDecodeLinearRouterRecords answers). Off: records
  // nullptr.
  MoeRouterRecords router_records = {};
};

// Shared memory the launches need beyond the default 48 KiB are allowed once
// here (before any graph capture): call at start with the largest k and the
// most rows that will be launched with it (m x k floats must fit the
// device's shared memory: DecodeLinearMaxRows says how many do).
cudaError_t PrepareDecodeLinear(int32_t max_k, int32_t max_rows);

// The most rows (<= kDecodeLinearMaxRows) whose inputs of max_k floats fit
// one CTA's shared memory on the current device; 0 when not even one does,
// with `*error` set when the device could not be asked.
int32_t DecodeLinearMaxRows(int32_t max_k, cudaError_t* error);

// cudaErrorInvalidValue for bad sizes or pointers (no launch); else the
// launch's error.
cudaError_t LaunchDecodeLinear(const DecodeLinearParams& p, cudaStream_t stream);

// Whether p.rotary holds what kRotaryKv needs, for p's n (host side; the
// fused decode linears and the small-batch GEMM check it).
bool RotaryKvParamsValid(const DecodeRotaryKv& q, int64_t n);
bool RotaryKvParamsValid(const DecodeLinearParams& p);

}  // namespace ernie::cuda
