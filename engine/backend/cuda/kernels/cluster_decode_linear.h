// The fused decode linear (decode_linear.h's prologues and epilogues) for
// steps of 9 to 64 rows, on the tensor cores, with k split over a thread
// block cluster.
//
// decode_linear.cu keeps every input row in float32 shared memory and runs
// its dot products on the CUDA cores: fine for 8 rows, not for 64. Above 8
// rows the forward pass used to take cuBLAS GEMMs with a separate kernel for
// each norm, SiLU and rotary (nine kernels a layer, ~55 us at 64 rows on the
// 0.3b, NOTES.md v12). Here:
//   - each CTA owns 64 (or 128) weight rows and a 256-wide slice of k: its
//     weights go straight from memory into mma fragments in registers,
//     requested before the kernel waits for the one before it (programmatic
//     dependent launch), and its slice of the input rows is copied to
//     shared memory (cp.async) and rounded to bf16 there;
//   - the k / 256 CTAs of a cluster hold one row group's partial sums; they
//     meet through distributed shared memory, summed in a fixed order (no
//     atomics: results repeat bit for bit), each CTA finishing a share of
//     the outputs with the epilogue;
//   - the RMS norm comes out of the sum: y = (W (g x)) / rms(x), the slices'
//     sums of squares added with the partials, so no CTA reads a whole row.
// The input the tensor cores see is bf16(g x) (x itself for bf16 input), as
// on the cuBLAS path (which rounds the normalised rows to bf16); the
// accumulation is float32.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/backend/cuda/kernels/decode_linear.h"

namespace ernie::cuda {

inline constexpr int32_t kClusterDecodeLinearMaxRows = 64;

// Whether the kernel takes a linear of this shape: k a multiple of 256 and
// at most 16 x 256 (one cluster), n a multiple of 64 (kSiluMul: n / 2 a
// multiple of 32). Other shapes stay on the cuBLAS path.
bool ClusterDecodeLinearSupports(int32_t n, int32_t k, DecodeEpilogue epilogue);

// Allows the kernels' shared memory and clusters of more than 8 CTAs; call
// once at start, before any graph capture.
cudaError_t PrepareClusterDecodeLinear();

// Same parameters and results as LaunchDecodeLinear (y float32) for
// 1 <= p.m <= kClusterDecodeLinearMaxRows on a supported shape, except that
// the input is rounded to bf16 as said above; row_index, bias and every
// epilogue as there. cudaErrorInvalidValue for anything else (no launch).
// Launched as a programmatic dependent of the kernel before it.
cudaError_t LaunchClusterDecodeLinear(const DecodeLinearParams& p, cudaStream_t stream);

}  // namespace ernie::cuda
