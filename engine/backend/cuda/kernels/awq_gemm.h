// Linear layers on AutoAWQ int4 weights (w[k][n] = (q - z) * s, groups of
// `group_size` input features), in the layout awq_repack.h makes at load:
//
//   decode (1 <= m <= 32): LaunchAwqGemv reads the packed nibbles once with
//     16-byte streaming loads, turns them into exact bf16 (q - z) in
//     registers (mask, or with the bf16 exponent of 128, subtract 128 + z:
//     two integer-exact ops per pair), multiplies them with x on the tensor
//     cores (mma.m16n8k16, float32 accumulation) and applies the scale s to
//     each 32-k partial sum in float32. Each CTA owns whole output rows.
//     For m <= 8 the CTA first copies x's rows to shared memory when they
//     fit (awq_blocks.cuh, kAwqMaxStagedXBytes).
//   prefill (any m): LaunchAwqDequantize writes bf16 W [n, k] (the torch
//     Linear layout) into a workspace the caller owns, then the caller runs
//     the bf16 cuBLAS GEMM (gemm.h) on it. The caller picks the path by m;
//     tools/bench/cuda/gemv_bench.cc measures the switch point.
//
// Packed layout (n padded to a multiple of 16 with zero rows; k % 64 == 0):
//   packed  uint32 [ceil(n/16)][k/64][32][4]   one 16-byte load per lane and
//           64-k block of a 16-row tile. Lane l = 4g + c (g 0..7, c 0..3),
//           word j: row r = 16 tile + g + 8 (j % 2), half h = j / 2; nibble
//           at bits 4p + 16i (p 0..3, i 0..1) holds q[r][k] for
//           k = 64 block + 32h + 8c + 2p + i.
//           (Each bf16 pair the mma reads is one mask of the word shifted by
//           4p, AutoAWQ's own interleave; every 32-k half lies in one group.)
//   records uint32 [ceil(n/16)][8][G][2], G = k/group_size rounded up to
//           even: entry [tile][g][grp][i] is row r = 16 tile + g + 8i:
//           bits 0..15 the fp16 scale s[grp][r], bits 16..31 the bf16 value
//           128 + z[grp][r] (0x4300 + z). (A lane fetches the 16 bytes of a
//           group pair at once.)
// Bytes read per decode call: k n / 2 + 4 n k / group (+ x and y).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "engine/backend/cuda/kernels/gemv_bf16.h"

namespace ernie::cuda {

// Device view of one repacked AWQ linear (layout above).
struct AwqWeightsView {
  const uint32_t* packed = nullptr;   // [ceil(n/16)][k/64][32][4], 16-byte aligned
  const uint32_t* records = nullptr;  // [ceil(n/16)][8][k/group_size rounded up to even][2], 16-byte aligned
  int32_t n = 0;                      // output features, a multiple of 8 (AWQ packs 8 per int32)
  int32_t k = 0;                      // input features, a multiple of 64 and of group_size
  int32_t group_size = 0;             // a power of two >= 32 (AutoAWQ uses 32, 64, 128)
};

// Sizes (uint32 words) of the two arrays, and the bf16 workspace
// LaunchAwqDequantize fills (bytes), for an n x k linear.
inline int64_t AwqPackedWords(int64_t n, int64_t k) { return (n + 15) / 16 * 16 * k / 8; }
inline int64_t AwqRecordWords(int64_t n, int64_t k, int64_t group_size) {
  return (n + 15) / 16 * 16 * ((k / group_size + 1) / 2 * 2);
}
inline size_t AwqDequantWorkspaceBytes(int64_t n, int64_t k) { return static_cast<size_t>(n * k) * 2; }

// How the int4 GEMV's k loop brings its weights in for m <= 8:
// kRegisters loads them into registers a few chunks ahead (awq_blocks.cuh),
// kBulkCopy streams them through a shared-memory ring by bulk copies
// (awq_bulk_loop.cuh; falls back to kRegisters when its shared memory does
// not fit). kAuto is the measured faster one.
enum class AwqGemvLoop { kAuto, kRegisters, kBulkCopy };

struct AwqGemvParams {
  const __nv_bfloat16* x = nullptr;  // [m, k] row-major, 16-byte aligned
  AwqWeightsView w;
  void* y = nullptr;  // [m, n] row-major, float or bf16 per `out`
  int32_t m = 0;      // 1 .. kGemvMaxRows
  LinearOutput out = LinearOutput::kF32;
  int32_t k_slices = 0;  // as GemvBf16Params::k_slices
  AwqGemvLoop loop = AwqGemvLoop::kAuto;
};

// log2(w.group_size) when w is a valid view for the int4 kernels (pointers
// set and 16-byte aligned, n % 8 == 0, k a multiple of 64 and of a
// power-of-two group >= 32), else -1. Every int4 launcher checks with it.
int CheckedGroupShift(const AwqWeightsView& w);

// y = x W^T. cudaErrorInvalidValue for a null or misaligned pointer or a
// size out of range; otherwise the launch's error. Allocates nothing.
cudaError_t LaunchAwqGemv(const AwqGemvParams& p, cudaStream_t stream);

struct AwqDequantizeParams {
  AwqWeightsView w;
  __nv_bfloat16* out =
      nullptr;           // [n, k] row-major, 16-byte aligned: (q - z) * s rounded to bf16 (exact product, one rounding)
  size_t out_bytes = 0;  // capacity of `out`; at least AwqDequantWorkspaceBytes(n, k)
};

// cudaErrorInvalidValue as above or when `out` is too small.
cudaError_t LaunchAwqDequantize(const AwqDequantizeParams& p, cudaStream_t stream);

}  // namespace ernie::cuda
