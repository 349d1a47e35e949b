#include <cmath>

#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/paged_attention.h"

namespace ernie::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = kAttentionRowsPerCta / kWarps;
constexpr int kKeysPerChunk = 32;  // one key per lane in the score phase

// Grid: (num_items, num_kv_heads). The CTA walks the sequence's positions in
// chunks of 32: all threads load the chunk's K and V rows (16-byte loads,
// widened to float in shared memory), then each warp updates its query rows:
// lane j scores key j, the warp takes the chunk's max and sum, and lane l
// accumulates output dims l, l + 32, ... over the chunk's keys.
template <int D>
__global__ void __launch_bounds__(kWarps * 32) PagedAttentionKernel(PagedAttentionParams p) {
  constexpr int kDimsPerLane = (D + 31) / 32;
  constexpr int kVectors = D / 8;  // 16-byte vectors per K or V row
  __shared__ float q_s[kAttentionRowsPerCta][D];
  __shared__ float k_s[kKeysPerChunk][D + 1];  // +1: lanes read different rows, same column
  __shared__ float v_s[kKeysPerChunk][D];

  const AttentionWorkItem item = p.items[blockIdx.x];
  const int kv_head = blockIdx.y;
  const int group = p.num_heads / p.num_kv_heads;
  const int rows = item.num_tokens * group;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  for (int idx = threadIdx.x; idx < rows * D; idx += blockDim.x) {
    const int r = idx / D, d = idx % D;
    const int64_t t = item.token_begin + r / group;
    const int head = kv_head * group + r % group;
    q_s[r][d] = p.q[t * p.q_row_stride + int64_t{head} * D + d] * p.scale;
  }

  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kDimsPerLane];
  int row_pos[kRowsPerWarp];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int r = warp * kRowsPerWarp + i;
    row_pos[i] = r < rows ? p.positions[item.token_begin + r / group] : -1;
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int j = 0; j < kDimsPerLane; ++j) acc[i][j] = 0.0f;
  }

  const int32_t* table = p.block_tables + item.block_table_offset;
  const int context = p.positions[item.token_begin + item.num_tokens - 1] + 1;
  for (int start = 0; start < context; start += kKeysPerChunk) {
    __syncthreads();  // q_s written / the previous chunk consumed
    for (int idx = threadIdx.x; idx < kKeysPerChunk * kVectors; idx += blockDim.x) {
      const int j = idx / kVectors, c = (idx % kVectors) * 8;
      const int pos = start + j;
      float kf[8], vf[8];
      if (pos < context) {
        const int64_t off = KvOffset(p.cache, table[pos / p.cache.block_size], kv_head, pos % p.cache.block_size) + c;
        kernels::LoadBf16x8(p.cache.k + off, kf);
        kernels::LoadBf16x8(p.cache.v + off, vf);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e) kf[e] = vf[e] = 0.0f;  // never weighted, but must not be NaN
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        k_s[j][c + e] = kf[e];
        v_s[j][c + e] = vf[e];
      }
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      if (row_pos[i] < start) continue;  // warp-uniform: past this row's causal limit (or no row)
      const int r = warp * kRowsPerWarp + i;
      const int key = start + lane;
      float s = -INFINITY;
      if (key <= row_pos[i]) {
        float dot = 0.0f;
#pragma unroll 8
        for (int d = 0; d < D; ++d) dot += q_s[r][d] * k_s[lane][d];
        s = dot;
      }
      const float m_new = fmaxf(m[i], kernels::WarpMax(s));  // finite: key `start` is visible
      const float correction = expf(m[i] - m_new);
      const float prob = key <= row_pos[i] ? expf(s - m_new) : 0.0f;
      l[i] = l[i] * correction + kernels::WarpSum(prob);
      m[i] = m_new;
#pragma unroll
      for (int j = 0; j < kDimsPerLane; ++j) acc[i][j] *= correction;
      const int visible = min(kKeysPerChunk, row_pos[i] - start + 1);
      for (int k = 0; k < visible; ++k) {
        const float pk = __shfl_sync(kernels::kFullMask, prob, k);
#pragma unroll
        for (int j = 0; j < kDimsPerLane; ++j) {
          const int d = j * 32 + lane;
          if (d < D) acc[i][j] += pk * v_s[k][d];
        }
      }
    }
  }

#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    if (row_pos[i] < 0) continue;
    const int r = warp * kRowsPerWarp + i;
    const int64_t t = item.token_begin + r / group;
    const int head = kv_head * group + r % group;
    __nv_bfloat16* out = p.out + (t * p.num_heads + head) * D;
    const float inv_l = 1.0f / l[i];
#pragma unroll
    for (int j = 0; j < kDimsPerLane; ++j) {
      const int d = j * 32 + lane;
      if (d < D) out[d] = __float2bfloat16(acc[i][j] * inv_l);
    }
  }
}

template <int D>
cudaError_t Launch(const PagedAttentionParams& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.num_items), static_cast<unsigned>(p.num_kv_heads));
  PagedAttentionKernel<D><<<grid, kWarps * 32, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

bool PagedAttentionSupportsHeadDim(int32_t head_dim) {
  switch (head_dim) {
    case 8: case 16: case 24: case 32: case 64: case 128: return true;
    default: return false;
  }
}

cudaError_t LaunchPagedAttention(const PagedAttentionParams& p, cudaStream_t stream) {
  if (p.q == nullptr || p.items == nullptr || p.block_tables == nullptr || p.positions == nullptr ||
      p.out == nullptr || p.cache.k == nullptr || p.cache.v == nullptr || p.num_items <= 0 || p.num_kv_heads <= 0 ||
      p.num_heads % p.num_kv_heads != 0 || p.num_heads / p.num_kv_heads > kAttentionRowsPerCta ||
      p.cache.head_dim != p.head_dim || p.cache.num_kv_heads != p.num_kv_heads)
    return cudaErrorInvalidValue;
  switch (p.head_dim) {
    case 8: return Launch<8>(p, stream);
    case 16: return Launch<16>(p, stream);
    case 24: return Launch<24>(p, stream);
    case 32: return Launch<32>(p, stream);
    case 64: return Launch<64>(p, stream);
    case 128: return Launch<128>(p, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace ernie::cuda
