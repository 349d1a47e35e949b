// The interleaved rotary embedding of one pair (2i, 2i+1) in float32, shared
// by the rotary + KV-write kernel and the decode GEMV's kRotaryKv epilogue,
// so both paths rotate with the very same expression (and the same float32
// angle, position * inv_freq[i], as the CPU reference computes it).
#pragma once

#include <cuda_runtime_api.h>

namespace ernie::cuda::kernels {

__device__ __forceinline__ float2 RotatePair(float a, float b, float position, float inv_freq) {
  float s, c;
  sincosf(position * inv_freq, &s, &c);
  return make_float2(a * c - b * s, b * c + a * s);
}

}  // namespace ernie::cuda::kernels
