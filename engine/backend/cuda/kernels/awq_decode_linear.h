// The fused decode linear (decode_linear.h: the same prologues and
// epilogues, the same DecodeLinearParams) on AWQ int4 weights, so an AWQ
// model's decode step is as few kernels a layer as a bf16 one.
//
// The matrix product is awq_gemm.h's int4 GEMV (a warp per 16-row tile and
// k slice, tensor-core products, 256-k chunks streamed ahead); before it,
// each CTA writes its input rows to shared memory as bf16 (RMS-normalised
// when asked: the float32 residual stream, normalised in float32, then
// rounded once, as the unfused path's norm kernel writes h), and after it
// the CTA's cross-warp sums go through the epilogue:
//   kStore, kAddResidual  per row, bias added
//   kSiluMul              gate row j and up row width + j sit in the same CTA
//                         (its first half of tiles are gate tiles, the second
//                         half the matching up tiles), so width % 16 == 0
//   kRotaryKv             row pairs (2j, 2j + 1) sit in one tile
// p.w (the bf16 weights) is not read; `w` is the repacked linear, n x k.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/backend/cuda/kernels/awq_gemm.h"
#include "engine/backend/cuda/kernels/decode_linear.h"

namespace ernie::cuda {

// Allows the shared memory of max_rows input rows of up to max_k features
// (bf16) once, before any graph capture, as PrepareDecodeLinear does.
cudaError_t PrepareAwqDecodeLinear(int32_t max_k, int32_t max_rows);

// cudaErrorInvalidValue for bad sizes or pointers (as LaunchDecodeLinear,
// plus w's: n and k must match p's, k a multiple of 64, width % 16 == 0
// for kSiluMul); else the launch's error.
cudaError_t LaunchAwqDecodeLinear(const DecodeLinearParams& p, const AwqWeightsView& w, cudaStream_t stream);

// The records a launch of p with router records writes (its CTAs over its
// clusters of up to p.router_records.record_cluster): what the readers'
// MoeRouterRecords::count must be, and the launch checks. `*error` is set
// when the device could not be asked.
int32_t AwqDecodeLinearRouterRecords(const DecodeLinearParams& p, const AwqWeightsView& w, cudaError_t* error);
// Whether this device runs the records launch in clusters of `cluster` CTAs
// at input width k (16 is a non-portable size; after PrepareAwqDecodeLinear).
// `*error` is set when the device could not be asked.
bool AwqDecodeLinearRunsRecordClusters(int32_t cluster, int32_t k, cudaError_t* error);

}  // namespace ernie::cuda
