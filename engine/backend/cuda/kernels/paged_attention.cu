#include <algorithm>
#include <cmath>

#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/paged_attention.h"

namespace ernie::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = kAttentionRowsPerCta / kWarps;
constexpr int kKeysPerChunk = 32;  // one key per lane in the score phase
constexpr int kMergeThreads = 256;

// Grid: (num_items, num_kv_heads, num_splits). The CTA walks its split of the
// sequence's positions in chunks of 32: all threads load the chunk's K and V
// rows (16-byte loads, widened to float in shared memory), then each warp
// updates its query rows together: lane j scores key j for every row, the
// warp takes each row's max and sum, and lane l accumulates output dims l,
// l + 32, ... of every row over the chunk's keys. With one split it writes the normalised bf16 output; with several,
// the unnormalised partial output and its (max, sum) for MergeSplitsKernel.
template <int D>
__global__ void __launch_bounds__(kWarps * 32) PagedAttentionKernel(PagedAttentionParams p) {
  constexpr int kDimsPerLane = (D + 31) / 32;
  constexpr int kVectors = D / 8;  // 16-byte vectors per K or V row
  __shared__ __align__(16) float q_s[kAttentionRowsPerCta][D];
  // +4: lanes read 16 bytes of different rows at the same column; a row
  // stride of D + 4 floats puts 8 such lanes on 32 different banks.
  __shared__ __align__(16) float k_s[kKeysPerChunk][D + 4];
  __shared__ float v_s[kKeysPerChunk][D];

  kernels::AllowDependentLaunch();
  const AttentionWorkItem item = p.items[blockIdx.x];
  const int kv_head = blockIdx.y;
  const int group = p.num_heads / p.num_kv_heads;
  const int rows = item.num_tokens * group;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;

  // Rows past `rows` are zero: every warp scores its rows whether or not they exist.
  for (int idx = threadIdx.x; idx < kAttentionRowsPerCta * D; idx += blockDim.x) {
    const int r = idx / D, d = idx % D;
    const int64_t t = item.token_begin + r / group;
    const int head = kv_head * group + r % group;
    q_s[r][d] = r < rows ? p.q[t * p.q_row_stride + int64_t{head} * D + d] * p.scale : 0.0f;
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
  // This CTA's keys: [begin, end) of the context (empty for a split past a short context).
  const int per_split = (context + p.num_splits - 1) / p.num_splits;
  const int begin = blockIdx.z * per_split;
  const int end = min(context, begin + per_split);
  for (int start = begin; start < end; start += kKeysPerChunk) {
    __syncthreads();  // q_s written / the previous chunk consumed
    for (int idx = threadIdx.x; idx < kKeysPerChunk * kVectors; idx += blockDim.x) {
      const int j = idx / kVectors, c = (idx % kVectors) * 8;
      const int pos = start + j;
      float kf[8], vf[8];
      if (pos < end) {
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
    // Scores of key `start + lane` for each of the warp's rows: one 16-byte
    // shared load of the key serves every row, the rows' q loads broadcast.
    const int key = start + lane;
    float score[kRowsPerWarp];
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) score[i] = 0.0f;
#pragma unroll 8
    for (int d = 0; d < D; d += 4) {
      const float4 kv = *reinterpret_cast<const float4*>(&k_s[lane][d]);
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        const float4 qv = *reinterpret_cast<const float4*>(&q_s[warp * kRowsPerWarp + i][d]);
        score[i] += qv.x * kv.x + qv.y * kv.y + qv.z * kv.z + qv.w * kv.w;
      }
    }
    // Online softmax per row; a row past its causal limit here (or no row)
    // takes no part (warp-uniform) and gets probability 0 for every key.
    float prob[kRowsPerWarp];
    int visible = 0;  // keys any of the warp's rows sees in this chunk
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      prob[i] = 0.0f;
      if (row_pos[i] < start) continue;
      const int last = min(row_pos[i], end - 1);  // this row's last visible key in the split
      const float s = key <= last ? score[i] : -INFINITY;
      const float m_new = fmaxf(m[i], kernels::WarpMax(s));  // finite: key `start` is visible
      const float correction = expf(m[i] - m_new);
      prob[i] = key <= last ? expf(s - m_new) : 0.0f;
      l[i] = l[i] * correction + kernels::WarpSum(prob[i]);
      m[i] = m_new;
#pragma unroll
      for (int j = 0; j < kDimsPerLane; ++j) acc[i][j] *= correction;
      visible = max(visible, min(kKeysPerChunk, last - start + 1));
    }
    // Weighted values: each V element read once from shared memory for all rows.
    for (int k = 0; k < visible; ++k) {
      float pk[kRowsPerWarp];
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) pk[i] = __shfl_sync(kernels::kFullMask, prob[i], k);
#pragma unroll
      for (int j = 0; j < kDimsPerLane; ++j) {
        const int d = j * 32 + lane;
        if (d >= D) continue;
        const float v = v_s[k][d];
#pragma unroll
        for (int i = 0; i < kRowsPerWarp; ++i) acc[i][j] += pk[i] * v;
      }
    }
  }

  if (p.num_splits > 1) {
    // Partial results; a row that saw no key here leaves max -inf and sum 0.
    const int64_t cta = (int64_t{blockIdx.x} * p.num_kv_heads + kv_head) * p.num_splits + blockIdx.z;
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      if (row_pos[i] < 0) continue;
      const int r = warp * kRowsPerWarp + i;
      float* out = p.partial_out + (cta * kAttentionRowsPerCta + r) * D;
#pragma unroll
      for (int j = 0; j < kDimsPerLane; ++j) {
        const int d = j * 32 + lane;
        if (d < D) out[d] = acc[i][j];
      }
      if (lane == 0) {
        p.partial_ml[(cta * kAttentionRowsPerCta + r) * 2] = m[i];
        p.partial_ml[(cta * kAttentionRowsPerCta + r) * 2 + 1] = l[i];
      }
    }
    return;
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

// Grid: (num_items, num_kv_heads). out = sum_z e^(m_z - M) acc_z / sum_z e^(m_z - M) l_z
// with M the largest m_z: finite, since split 0 holds key 0, which every row
// sees. The (max, sum) pairs go through shared memory first, so the loads of
// the partial outputs are independent and pipeline.
template <int D>
__global__ void __launch_bounds__(kMergeThreads) MergeSplitsKernel(PagedAttentionParams p) {
  __shared__ float weight[kMaxAttentionSplits][kAttentionRowsPerCta];  // e^(m_z - M), then / sum
  __shared__ float ml[kMaxAttentionSplits][kAttentionRowsPerCta][2];
  kernels::AllowDependentLaunch();
  const AttentionWorkItem item = p.items[blockIdx.x];
  const int kv_head = blockIdx.y;
  const int group = p.num_heads / p.num_kv_heads;
  const int rows = item.num_tokens * group;
  const int64_t first_cta = (int64_t{blockIdx.x} * p.num_kv_heads + kv_head) * p.num_splits;
  for (int t = threadIdx.x; t < p.num_splits * kAttentionRowsPerCta; t += blockDim.x) {
    const int z = t / kAttentionRowsPerCta, r = t % kAttentionRowsPerCta;
    const int64_t row = (first_cta + z) * kAttentionRowsPerCta + r;
    ml[z][r][0] = r < rows ? p.partial_ml[row * 2] : -INFINITY;
    ml[z][r][1] = r < rows ? p.partial_ml[row * 2 + 1] : 0.0f;
  }
  __syncthreads();
  if (threadIdx.x < rows) {
    const int r = threadIdx.x;
    float max_m = -INFINITY;
    for (int z = 0; z < p.num_splits; ++z) max_m = fmaxf(max_m, ml[z][r][0]);
    float sum = 0.0f;
    for (int z = 0; z < p.num_splits; ++z) {
      // A split with no key visible to the row (max -inf) weighs 0.
      const float w = ml[z][r][0] == -INFINITY ? 0.0f : expf(ml[z][r][0] - max_m);
      weight[z][r] = w;
      sum += w * ml[z][r][1];
    }
    for (int z = 0; z < p.num_splits; ++z) weight[z][r] /= sum;
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < rows * D; idx += blockDim.x) {
    const int r = idx / D, d = idx % D;
    float value = 0.0f;
#pragma unroll 8
    for (int z = 0; z < p.num_splits; ++z)
      value += weight[z][r] * p.partial_out[((first_cta + z) * kAttentionRowsPerCta + r) * D + d];
    const int64_t t = item.token_begin + r / group;
    const int head = kv_head * group + r % group;
    p.out[(t * p.num_heads + head) * D + d] = __float2bfloat16(value);
  }
}

template <int D>
cudaError_t Launch(const PagedAttentionParams& p, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.num_items), static_cast<unsigned>(p.num_kv_heads),
                  static_cast<unsigned>(p.num_splits));
  PagedAttentionKernel<D><<<grid, kWarps * 32, 0, stream>>>(p);
  if (p.num_splits == 1) return cudaGetLastError();
  const cudaError_t launched = cudaGetLastError();
  if (launched != cudaSuccess) return launched;
  MergeSplitsKernel<D><<<dim3(grid.x, grid.y), kMergeThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

int32_t PagedAttentionSplits(int32_t num_items, int32_t num_kv_heads, int32_t num_sms) {
  const int64_t pairs = int64_t{num_items} * num_kv_heads;
  if (pairs <= 0 || 4 * pairs >= num_sms) return 1;
  return static_cast<int32_t>(std::min<int64_t>(kMaxAttentionSplits, (2 * int64_t{num_sms} + pairs - 1) / pairs));
}

// pairs < num_sms / 4 whenever splits > 1, and pairs * splits < 2 * num_sms + pairs.
int64_t PagedAttentionPartialCtas(int32_t num_sms) { return 3 * int64_t{num_sms}; }

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
      p.cache.head_dim != p.head_dim || p.cache.num_kv_heads != p.num_kv_heads || p.num_splits < 1 ||
      p.num_splits > kMaxAttentionSplits ||
      (p.num_splits > 1 && (p.partial_out == nullptr || p.partial_ml == nullptr)))
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
