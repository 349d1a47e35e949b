// Read-only probes for ernie-bench-gemv: what the int4 GEMV's bytes cost
// when nothing is computed on them, timed the same way as the kernels (one
// launch per weight copy in a graph). They are the measured roofline the
// GEMV is read against at its own byte count, where the 4.3 TB/s floor of
// the issues leaves out the cost of starting and draining a ~10 us stream:
//   stream read:   every 16-byte piece of the weights once, grid-stride, kUnroll
//                  loads a thread in flight, `ctas_per_sm` CTAs of 256
//                  threads an SM, plain launches (no programmatic overlap);
//   pattern read:  the int4 GEMV's own walk (awq_blocks.cuh's AwqWalkSlice,
//                  which AwqAccumulateSlice runs: a warp's chunks of 4 x 512
//                  bytes and their records at its k slice, two chunks in
//                  flight while one is "computed", the launcher's grid and k
//                  split, the programmatic launch and wait) with the
//                  dequantise and the mmas replaced by an xor of the words:
//                  the gap between it and the GEMV is the math's latency,
//                  the gap between it and the stream read is the walk's;
//                  with the x staging and the k slices' reduction, and then
//                  the dequantisation, added one at a time, what each part
//                  of the GEMV costs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/backend/cuda/kernels/awq_gemm.h"

namespace ernie::bench {

// Reads a_bytes at a, then b_bytes at b (multiples of 16, 16-byte aligned;
// b_bytes may be 0), as one range. `unroll`: 2, 4 or 8. `sink` (4 bytes) is
// written only if the xor of everything read matches an impossible value
// (the loads must not be optimised away).
cudaError_t LaunchStreamRead(const void* a, int64_t a_bytes, const void* b, int64_t b_bytes, int ctas_per_sm,
                             int unroll, uint32_t* sink, cudaStream_t stream);

// The int4 GEMV's walk over `w` (m = 1: one x tile; groups >= 128).
struct AwqWalkParams {
  cuda::AwqWeightsView w;
  const __nv_bfloat16* x = nullptr;  // [k], for stage_and_reduce
  float* y = nullptr;                // [n], for stage_and_reduce (written with nonsense)
  int k_slices = 0;                  // 0: the launcher's own choice
  // What of the GEMV's work besides the loads the walk does too: the x
  // staging (with unit sums) after the wait and the k slices' reduction and
  // store at the end; the dequantisation of every nibble pair to bf16.
  bool stage_and_reduce = false, dequantize = false;
  uint32_t* sink = nullptr;  // as LaunchStreamRead's
};
cudaError_t LaunchAwqWalk(const AwqWalkParams& p, cudaStream_t stream);

}  // namespace ernie::bench
