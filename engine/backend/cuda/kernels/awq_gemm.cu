// AWQ int4 linears: the decode kernel and the prefill dequantiser (see
// awq_gemm.h for the packed layout, linear_mma.cuh for the tile mapping).
//
// Decode work split, as in gemv_bf16.cu: a warp owns a 16-row tile and a k
// slice, 8 warps a CTA, slices summed in shared memory. Along k the warp
// steps in 64-k blocks: one 16-byte piece per lane (rows g and g + 8, two
// 32-k halves) and the block's scale/zero records. Both stream through a
// ring of kStages blocks per warp in shared memory filled with cp.async, so
// kStages - 1 blocks stay in flight while one is computed, without holding
// registers. Each 32-k half h is two mma k-steps whose slots hold
//   step e, slots (2c, 2c+1):   32h + 8c + 4e + {0, 1}
//   step e, slots (2c+8, 2c+9): 32h + 8c + 4e + {2, 3}
// so the lane's x operand for the half is the 16 bytes at x[32h + 8c], and
// the half's partial sums are scaled once by its group's s (every 32-k half
// lies in one group, group_size being a multiple of 32).
#include <cuda_fp16.h>

#include "engine/backend/cuda/kernels/awq_gemm.h"
#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/linear_mma.cuh"

namespace ernie::cuda {

namespace {

using kernels::kLinearWarps;

constexpr int kBlockK = 64;
constexpr int kStages = 8;           // ring depth per warp (blocks)
constexpr int kRingPieces = 32 + 8;  // per block: a 16-byte piece per lane, then 8 record pairs
__device__ __forceinline__ uint32_t WordOf(const uint4& v, int w) {
  return w == 0 ? v.x : w == 1 ? v.y : w == 2 ? v.z : v.w;
}

// The exact bf16 pair (q - z) of the nibbles at bits 4p and 16 + 4p of
// `word`: or-ing a nibble into the mantissa of bf16 128.0 (0x4300; its ulp
// is 1) gives 128 + q exactly; subtracting 128 + z (`zz`, both halves) is
// exact too (small integers).
__device__ __forceinline__ uint32_t DequantPair(uint32_t word, int p, uint32_t zz) {
  const uint32_t biased = ((word >> (4 * p)) & 0x000F000Fu) | 0x43004300u;
  const __nv_bfloat162 d =
      __hsub2(*reinterpret_cast<const __nv_bfloat162*>(&biased), *reinterpret_cast<const __nv_bfloat162*>(&zz));
  return *reinterpret_cast<const uint32_t*>(&d);
}

// A record's fp16 scale as float.
__device__ __forceinline__ float RecordScale(uint32_t rec) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(rec & 0xffffu)));
}

template <int kTiles>
__global__ void __launch_bounds__(32 * kLinearWarps) AwqGemvKernel(AwqGemvParams p, int k_slices, int group_shift) {
  kernels::AllowDependentLaunch();
  kernels::WaitForPrerequisiteGrids();  // launched as a dependent: see LaunchDependent
  __shared__ uint4 ring[kLinearWarps][kStages][kRingPieces];
  static_assert(sizeof(ring) >= sizeof(float) * kLinearWarps * 16 * 8 * kTiles, "the reduction reuses the ring");
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int tiles_per_cta = kLinearWarps / k_slices;
  const int slice = warp % k_slices;
  const int64_t tiles = (int64_t{p.w.n} + 15) / 16;
  // A tile past the last (grid rounding) reads the last one again; ReduceAndStore drops its rows.
  const int64_t tile = min(int64_t{blockIdx.x} * tiles_per_cta + warp / k_slices, tiles - 1);
  const int k = p.w.k, blocks = k / kBlockK, groups2 = ((k >> group_shift) + 1) / 2 * 2;
  const uint4* packed = reinterpret_cast<const uint4*>(p.w.packed) + tile * blocks * 32 + lane;
  // This lane's g: records of rows g and g + 8 for group pairs (2j, 2j+1), one uint4 each.
  const uint4* records = reinterpret_cast<const uint4*>(p.w.records) + (tile * 8 + g) * groups2 / 2;
  const int my_blocks = slice < blocks ? (blocks - 1 - slice) / k_slices + 1 : 0;
  // Fixed per lane: its ring entries, the x rows it feeds (rows >= m feed zeros).
  uint4* ring_w = &ring[warp][0][lane];
  uint4* ring_r = &ring[warp][0][32 + g];
  const bool copies_records = c == 0;
  const int block_step = k_slices * kBlockK;
  const uint4* x_rows[kTiles];
  bool x_valid[kTiles];
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
    x_valid[t] = 8 * t + g < p.m;
    x_rows[t] = reinterpret_cast<const uint4*>(p.x + int64_t{x_valid[t] ? 8 * t + g : 0} * k + 8 * c);
  }
  auto issue = [&](int i) {  // block i of this slice into ring slot i % kStages
    if (i >= my_blocks) return;
    const int b = slice + i * k_slices, slot = (i % kStages) * kRingPieces;
    kernels::CpAsync16(ring_w + slot, packed + b * 32);
    if (copies_records) kernels::CpAsync16(ring_r + slot, records + ((b * kBlockK) >> group_shift) / 2);
  };
  float acc[kTiles][4] = {};
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    issue(i);
    kernels::CpAsyncCommit();
  }
  int kk0 = slice * kBlockK;  // first k of block i
  for (int i = 0; i < my_blocks; ++i, kk0 += block_step) {
    kernels::CpAsyncWait<kStages - 2>();  // block i has landed
    __syncwarp();                         // ... for every lane, and block i - 1's slot is free
    issue(i + kStages - 1);
    kernels::CpAsyncCommit();
    const int slot = (i % kStages) * kRingPieces;
    const uint4 w = ring_w[slot];
    const uint4 r = ring_r[slot];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int kk = kk0 + 32 * h;
      const bool odd_group = ((kk >> group_shift) & 1) != 0;
      const uint32_t rec_a = odd_group ? r.z : r.x, rec_b = odd_group ? r.w : r.y;  // rows g, g + 8
      const float sa = RecordScale(rec_a), sb = RecordScale(rec_b);
      const uint32_t za = __byte_perm(rec_a, 0, 0x3232), zb = __byte_perm(rec_b, 0, 0x3232);  // 128 + z, twice
      const uint32_t wa = WordOf(w, 2 * h), wb = WordOf(w, 2 * h + 1);
      uint32_t ra[4], rb[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        ra[q] = DequantPair(wa, q, za);
        rb[q] = DequantPair(wb, q, zb);
      }
      const uint32_t a0[4] = {ra[0], rb[0], ra[1], rb[1]}, a1[4] = {ra[2], rb[2], ra[3], rb[3]};
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
        if (t > 0 && 8 * t >= p.m) break;  // same for the whole warp
        const uint4 xv = x_valid[t] ? __ldg(x_rows[t] + kk / 8) : make_uint4(0, 0, 0, 0);
        float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        kernels::MmaBf16(part, a0, xv.x, xv.y);
        kernels::MmaBf16(part, a1, xv.z, xv.w);
        acc[t][0] = fmaf(sa, part[0], acc[t][0]);
        acc[t][1] = fmaf(sa, part[1], acc[t][1]);
        acc[t][2] = fmaf(sb, part[2], acc[t][2]);
        acc[t][3] = fmaf(sb, part[3], acc[t][3]);
      }
    }
  }
  kernels::CpAsyncWait<0>();
  const int64_t cta_row0 = int64_t{blockIdx.x} * tiles_per_cta * 16;
  kernels::ReduceAndStore<kTiles>(acc, reinterpret_cast<float*>(ring), k_slices, cta_row0, p.w.n, p.m, p.y,
                                  p.out == LinearOutput::kBf16);
}

// One thread per (tile, 64-k block, lane): the 16 bytes that lane would load
// in the decode kernel, written out as bf16 (q - z) * s at their rows and k.
__global__ void AwqDequantizeKernel(AwqWeightsView w, __nv_bfloat16* out, int group_shift) {
  const int blocks = w.k / kBlockK, groups2 = ((w.k >> group_shift) + 1) / 2 * 2;
  const int64_t tiles = (int64_t{w.n} + 15) / 16;
  const int64_t item = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (item >= tiles * blocks * 32) return;
  const int lane = static_cast<int>(item % 32), g = lane / 4, c = lane % 4;
  const int block = static_cast<int>(item / 32 % blocks);
  const int64_t tile = item / 32 / blocks;
  const uint4 v = __ldg(reinterpret_cast<const uint4*>(w.packed) + item);
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int h = j / 2, i = j % 2;
    const int64_t r = tile * 16 + g + 8 * i;
    if (r >= w.n) continue;
    const int kk = block * kBlockK + 32 * h;
    const uint32_t rec = __ldg(w.records + ((tile * 8 + g) * groups2 + (kk >> group_shift)) * 2 + i);
    const float s = RecordScale(rec);
    const int z = static_cast<int>(rec >> 16) - 0x4300;
    const uint32_t word = WordOf(v, j);
    // The 8 values k = kk + 8c .. +7 of row r, one 16-byte store. (q - z) * s
    // is exact in float32 (4-bit integer times an 11-bit mantissa): one
    // rounding, to bf16.
    uint32_t pairs[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int lo = static_cast<int>((word >> (4 * q)) & 0xFu), hi = static_cast<int>((word >> (16 + 4 * q)) & 0xFu);
      const __nv_bfloat162 d = __floats2bfloat162_rn(static_cast<float>(lo - z) * s, static_cast<float>(hi - z) * s);
      pairs[q] = *reinterpret_cast<const uint32_t*>(&d);
    }
    *reinterpret_cast<uint4*>(out + r * w.k + kk + 8 * c) = make_uint4(pairs[0], pairs[1], pairs[2], pairs[3]);
  }
}

template <int kTiles>
cudaError_t LaunchGemvTiles(const AwqGemvParams& p, int group_shift, cudaStream_t stream) {
  cudaError_t error = cudaSuccess;
  const int64_t resident = kernels::ResidentCtas<AwqGemvKernel<kTiles>>(&error);
  if (error != cudaSuccess) return error;
  const int64_t row_tiles = (int64_t{p.w.n} + 15) / 16;
  const int k_slices = p.k_slices > 0 ? p.k_slices : kernels::PickKSlices(row_tiles, p.w.k / kBlockK, resident);
  const int64_t tiles_per_cta = kLinearWarps / k_slices;
  const auto grid = static_cast<unsigned>((row_tiles + tiles_per_cta - 1) / tiles_per_cta);
  return kernels::LaunchDependent(AwqGemvKernel<kTiles>, grid, dim3(32 * kLinearWarps), 0, stream, p, k_slices,
                                  group_shift);
}

bool AlignedTo(const void* ptr, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

// log2(group_size) for a valid view, -1 otherwise.
int CheckedGroupShift(const AwqWeightsView& w) {
  if (w.packed == nullptr || w.records == nullptr || !AlignedTo(w.packed, 16) || !AlignedTo(w.records, 16)) return -1;
  if (w.n < 8 || w.n % 8 != 0 || w.k < kBlockK || w.k % kBlockK != 0) return -1;
  if (w.group_size < 32 || (w.group_size & (w.group_size - 1)) != 0 || w.k % w.group_size != 0) return -1;
  return __builtin_ctz(static_cast<unsigned>(w.group_size));
}

}  // namespace

cudaError_t LaunchAwqGemv(const AwqGemvParams& p, cudaStream_t stream) {
  const int group_shift = CheckedGroupShift(p.w);
  if (group_shift < 0 || p.x == nullptr || p.y == nullptr || !AlignedTo(p.x, 16)) return cudaErrorInvalidValue;
  if (p.m < 1 || p.m > kGemvMaxRows) return cudaErrorInvalidValue;
  if (p.out != LinearOutput::kF32 && p.out != LinearOutput::kBf16) return cudaErrorInvalidValue;
  if (p.k_slices != 0 && p.k_slices != 1 && p.k_slices != 2 && p.k_slices != 4 && p.k_slices != 8)
    return cudaErrorInvalidValue;
  if (p.m <= 8) return LaunchGemvTiles<1>(p, group_shift, stream);
  if (p.m <= 16) return LaunchGemvTiles<2>(p, group_shift, stream);
  return LaunchGemvTiles<4>(p, group_shift, stream);
}

cudaError_t LaunchAwqDequantize(const AwqDequantizeParams& p, cudaStream_t stream) {
  const int group_shift = CheckedGroupShift(p.w);
  if (group_shift < 0 || p.out == nullptr || !AlignedTo(p.out, 16)) return cudaErrorInvalidValue;
  if (p.out_bytes < AwqDequantWorkspaceBytes(p.w.n, p.w.k)) return cudaErrorInvalidValue;
  const int64_t items = (int64_t{p.w.n} + 15) / 16 * (p.w.k / kBlockK) * 32;
  constexpr int kThreads = 256;
  AwqDequantizeKernel<<<static_cast<unsigned>((items + kThreads - 1) / kThreads), kThreads, 0, stream>>>(p.w, p.out,
                                                                                                         group_shift);
  return cudaGetLastError();
}

}  // namespace ernie::cuda
