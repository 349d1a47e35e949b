// Host launchers of the row-wise kernels (elementwise.cu): embedding gather,
// residual add fused with RMSNorm, SiLU-and-mul. Each validates its sizes
// (cudaErrorInvalidValue) and returns the launch's error; none allocates.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace ernie::cuda {

// x[t, :] = float(table[ids[t], :]). table: bf16 [vocab, hidden];
// ids: [tokens]; x: float [tokens, hidden].
cudaError_t LaunchEmbeddingGather(const __nv_bfloat16* table, const int32_t* ids, int32_t tokens, int32_t hidden,
                                  float* x, cudaStream_t stream);

// For each output row r, with t = row_index ? row_index[r] : r:
//   v = x[t] + (delta ? delta[t] + (delta_bias ? delta_bias : 0) : 0)
//   if write_residual: x[t] = v
//   out[r] = bf16(weight * (v / sqrt(mean(v^2) + eps)))
// so one pass does "x += block output" and the next block's input norm.
struct AddRmsNormParams {
  float* x = nullptr;                  // [*, hidden] residual stream (read; written when write_residual)
  const float* delta = nullptr;        // [*, hidden] block output to add, or nullptr
  const float* delta_bias = nullptr;   // [hidden] bias of that block output, or nullptr
  const float* weight = nullptr;       // [hidden] norm weight
  const int32_t* row_index = nullptr;  // [rows] rows of x to use, or nullptr for 0..rows-1
  __nv_bfloat16* out = nullptr;        // [rows, hidden]
  int32_t rows = 0;
  int32_t hidden = 0;
  float eps = 1e-5f;
  bool write_residual = true;
};
cudaError_t LaunchAddRmsNorm(const AddRmsNormParams& p, cudaStream_t stream);

// out[t, i] = silu(g) * u with g = gate_up[t, i] (+ bias[i]) and
// u = gate_up[t, I + i] (+ bias[I + i]). gate_up: float [tokens, 2I];
// bias: [2I] or nullptr; out: bf16 [tokens, I].
cudaError_t LaunchSiluAndMul(const float* gate_up, const float* bias, int32_t tokens, int32_t intermediate,
                             __nv_bfloat16* out, cudaStream_t stream);
// The same on a bf16 gate_up (the cuBLAS path's gate|up GEMM writes bf16: at
// prefill sizes this kernel is bound by HBM, and float32 gate|up rows were
// the step's widest activations, 200 MB a layer at 8,192 tokens).
cudaError_t LaunchSiluAndMul(const __nv_bfloat16* gate_up, const float* bias, int32_t tokens, int32_t intermediate,
                             __nv_bfloat16* out, cudaStream_t stream);

}  // namespace ernie::cuda
