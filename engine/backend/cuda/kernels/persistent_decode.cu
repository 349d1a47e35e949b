// The persistent one-token decode step (see persistent_decode.h).
//
// Layout of the work. The grid is one CTA of 16 warps on every SM; 15 of
// them take linear rows, W warps in all. A linear phase splits its weight rows into groups (one row, or
// the two rows one output needs: a rotary pair (2j, 2j + 1), or gate row j
// with up row I + j), and warp w takes groups w, w + W, ... in rounds of as
// many as its 16 register slots of 16 bytes hold (a slot is 8 weights of
// one row; a row of k weights is k / 256 slots a lane). The first round of
// the next phase is requested before the warp arrives at the barrier that
// ends this one, so the weights cross the barrier in registers. Everything
// the kernel itself writes (x, q, act, partial, the new cache row) is read
// back with ld.global.cg: the L1s are not coherent between SMs.
#include <algorithm>
#include <cfloat>

#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/decode_epilogue.cuh"
#include "engine/backend/cuda/kernels/persistent_decode.h"

namespace ernie::cuda {
namespace {

constexpr int kWarps = 16;
constexpr int kThreads = kWarps * 32;
// Warps 0 - 14 take the linears' rows; warp 15 arrives at the barriers, so
// the arriving thread's fence never waits on weight loads in flight.
constexpr int kLinearWarps = kWarps - 1;
constexpr int kBarrierThread = kLinearWarps * 32;
constexpr int kHalfSlots = 8;  // register slots are two halves of 8 (the lm_head double-buffers them)
constexpr int kSlots = 2 * kHalfSlots;
constexpr int kHeadDim = 128;  // a lane holds 4 dims of a head
constexpr int kMaxGroup = 8;   // query heads a KV head
constexpr float kLog2e = 1.4426950408889634f;

// ---------------------------------------------------------------------------
// Grid barrier: an arrival count and a generation word. The last CTA to
// arrive resets the count and advances the generation, so the pair is back
// to its start state after every barrier (a graph replays the kernel as is).
__device__ __forceinline__ uint32_t LoadAcquire(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void StoreRelease(uint32_t* p, uint32_t v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ void GridBarrier(uint32_t* barrier) {
  __syncthreads();
  if (threadIdx.x == kBarrierThread) {
    const uint32_t generation = LoadAcquire(barrier + 1);
    __threadfence();
    if (atomicAdd(barrier, 1u) == gridDim.x - 1) {
      barrier[0] = 0;
      StoreRelease(barrier + 1, generation + 1);
    } else {
      // A CTA that never arrives (a bug, not a state of the inputs) would
      // hang the device; trap instead, which fails the launch.
      uint32_t spins = 0;
      while (LoadAcquire(barrier + 1) == generation)
        if (++spins == (1u << 30)) __trap();
    }
    __threadfence();
  }
  __syncthreads();
}

// ---------------------------------------------------------------------------
// Weight loads: 16 bytes, not kept in L1, issued as volatile asm so the
// compiler keeps them where they are written (before the barrier).
__device__ __forceinline__ uint4 LoadWeights(const __nv_bfloat16* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// 8 bf16 weights . 8 float32 inputs from shared memory.
__device__ __forceinline__ float Dot8(const uint4& w, const float* x) {
  const float4 a = *reinterpret_cast<const float4*>(x);
  const float4 b = *reinterpret_cast<const float4*>(x + 4);
  auto lo = [](uint32_t v) { return __uint_as_float(v << 16); };
  auto hi = [](uint32_t v) { return __uint_as_float(v & 0xffff0000u); };
  float s = lo(w.x) * a.x;
  s = fmaf(hi(w.x), a.y, s);
  s = fmaf(lo(w.y), a.z, s);
  s = fmaf(hi(w.y), a.w, s);
  s = fmaf(lo(w.z), b.x, s);
  s = fmaf(hi(w.z), b.y, s);
  s = fmaf(lo(w.w), b.z, s);
  s = fmaf(hi(w.w), b.w, s);
  return s;
}

enum class Epilogue { kRotaryQkv, kAddResidual, kSiluMul, kLogits };

// One linear phase: rows of w grouped as the header says.
struct Linear {
  const __nv_bfloat16* w = nullptr;
  const float* bias = nullptr;
  int32_t groups = 0;      // output groups
  int32_t pair = 1;        // rows a group: 1 or 2
  int32_t row_stride = 1;  // first row of group g: g * row_stride
  int32_t pair_offset = 0; // second row: first + pair_offset
  int32_t k = 0;           // a multiple of 256
  int32_t max_slots = kSlots;  // slots one round fills (kHalfSlots: the lm_head's rounds)
  Epilogue epilogue = Epilogue::kAddResidual;

  __device__ int slots_per_row() const { return k >> 8; }
  __device__ int groups_per_round() const { return max(1, max_slots / (pair * slots_per_row())); }
  __device__ int rounds(int warps) const {
    const int per_warp = (groups + warps - 1) / warps;
    return (per_warp + groups_per_round() - 1) / groups_per_round();
  }
};

struct WarpSlots {
  uint4 half[2][kHalfSlots];
};

// Where the warp's slot j of round `round` reads: slot j is row q = j / spr
// of the round (group q / pair, its row q % pair), 8 weights at lane + 32 c.
// The walk keeps (q, c) as counters, so no slot divides.
__device__ __forceinline__ void IssueHalf(const Linear& L, int round, int first_slot, uint4 (&dst)[kHalfSlots]) {
  const int lane = threadIdx.x % 32;
  const int warps = gridDim.x * kLinearWarps, warp = blockIdx.x * kLinearWarps + threadIdx.x / 32;
  const int spr = L.slots_per_row(), gpr = L.groups_per_round();
  const int used = gpr * L.pair * spr;
  int q = first_slot / spr, c = first_slot % spr;
#pragma unroll
  for (int j = 0; j < kHalfSlots; ++j) {
    const int slot = first_slot + j;
    const int i = L.pair == 2 ? q >> 1 : q, e = L.pair == 2 ? q & 1 : 0;
    const int group = warp + (round * gpr + i) * warps;
    // Slots without a row hold zeros, not undefined values: a read of an
    // undefined register lets the compiler drop whatever it feeds (stores too).
    dst[j] = make_uint4(0, 0, 0, 0);
    if (slot < used && slot < L.max_slots && group < L.groups) {
      const int64_t row = int64_t{group} * L.row_stride + e * L.pair_offset;
      dst[j] = LoadWeights(L.w + row * L.k + 8 * (lane + 32 * c));
    }
    if (++c == spr) {
      c = 0;
      ++q;
    }
  }
}

__device__ __forceinline__ void Issue(const Linear& L, int round, WarpSlots& s) {
  if (threadIdx.x >= kBarrierThread) return;
  IssueHalf(L, round, 0, s.half[0]);
  if (L.max_slots > kHalfSlots) IssueHalf(L, round, kHalfSlots, s.half[1]);
}

// The dots of one half's slots against xs; a row's sum goes to
// row_sums[q] when its last slot is done (`cur` and (q, c) carry over
// from the first half to the second).
__device__ __forceinline__ void DotsHalf(const Linear& L, int round, int first_slot, const uint4 (&src)[kHalfSlots],
                                         const float* xs, float* row_sums, float& cur, int& q, int& c) {
  const int lane = threadIdx.x % 32;
  const int warps = gridDim.x * kLinearWarps, warp = blockIdx.x * kLinearWarps + threadIdx.x / 32;
  const int spr = L.slots_per_row(), gpr = L.groups_per_round();
  const int used = min(gpr * L.pair * spr, L.max_slots);
#pragma unroll
  for (int j = 0; j < kHalfSlots; ++j) {
    const int slot = first_slot + j;
    if (slot < used) {  // warp-uniform
      const int i = L.pair == 2 ? q >> 1 : q;
      const bool live = warp + (round * gpr + i) * warps < L.groups;
      if (live) cur += Dot8(src[j], xs + 8 * (lane + 32 * c));
      if (++c == spr) {
        if (live) {
          cur = kernels::WarpSum(cur);
          if (lane == 0) row_sums[q] = cur;
        }
        cur = 0.0f;
        c = 0;
        ++q;
      }
    }
  }
}

struct EpilogueArgs {
  float* out = nullptr;  // kAddResidual: x; kSiluMul: act; kLogits: logits; kRotaryQkv: q
  DecodeRotaryKv rotary;
};

// Lane i < groups_per_round finishes group i of the round from row_sums.
__device__ __forceinline__ void FinishRound(const Linear& L, int round, const float* row_sums, const EpilogueArgs& a) {
  __syncwarp();
  const int lane = threadIdx.x % 32;
  const int warps = gridDim.x * kLinearWarps, warp = blockIdx.x * kLinearWarps + threadIdx.x / 32;
  const int gpr = L.groups_per_round();
  const int group = warp + (round * gpr + lane) * warps;
  if (lane < gpr && group < L.groups) {
    const int64_t row = int64_t{group} * L.row_stride;
    float va = row_sums[lane * L.pair];
    if (L.bias != nullptr) va += __ldg(L.bias + row);
    switch (L.epilogue) {
      case Epilogue::kAddResidual:
        a.out[group] = __ldcg(a.out + group) + va;
        break;
      case Epilogue::kLogits:
        a.out[group] = va;
        break;
      case Epilogue::kSiluMul: {
        float vb = row_sums[lane * 2 + 1];
        if (L.bias != nullptr) vb += __ldg(L.bias + row + L.pair_offset);
        a.out[group] = kernels::Silu(va) * vb;
        break;
      }
      case Epilogue::kRotaryQkv: {
        float vb = row_sums[lane * 2 + 1];
        if (L.bias != nullptr) vb += __ldg(L.bias + row + 1);
        kernels::RotaryKvStore(a.rotary, a.out, /*n=*/0, /*r=*/0, row, va, vb);
        break;
      }
    }
  }
  __syncwarp();
}

// The phase's rounds: round 0's weights are already in `s` (requested
// before the barrier); later rounds alternate halves where the rounds use
// one half (the lm_head), else load and use the whole set in turn.
__device__ __forceinline__ void RunLinear(const Linear& L, WarpSlots& s, const float* xs, float* row_sums,
                                          const EpilogueArgs& a) {
  if (threadIdx.x >= kBarrierThread) return;
  const int rounds = L.rounds(gridDim.x * kLinearWarps);
  if (L.max_slots <= kHalfSlots) {
    for (int r = 0; r < rounds; r += 2) {
      if (r + 1 < rounds) IssueHalf(L, r + 1, 0, s.half[1]);
      float cur = 0.0f;
      int q = 0, c = 0;
      DotsHalf(L, r, 0, s.half[0], xs, row_sums, cur, q, c);
      FinishRound(L, r, row_sums, a);
      if (r + 1 >= rounds) break;
      if (r + 2 < rounds) IssueHalf(L, r + 2, 0, s.half[0]);
      cur = 0.0f;
      q = c = 0;
      DotsHalf(L, r + 1, 0, s.half[1], xs, row_sums, cur, q, c);
      FinishRound(L, r + 1, row_sums, a);
    }
    return;
  }
  for (int r = 0; r < rounds; ++r) {
    if (r > 0) Issue(L, r, s);
    float cur = 0.0f;
    int q = 0, c = 0;
    DotsHalf(L, r, 0, s.half[0], xs, row_sums, cur, q, c);
    DotsHalf(L, r, kHalfSlots, s.half[1], xs, row_sums, cur, q, c);
    FinishRound(L, r, row_sums, a);
  }
}

// ---------------------------------------------------------------------------
// xs = RMSNorm(x) * weight in float32, by the whole CTA (every CTA computes
// the same row). `x_bf16` instead of x: layer 0 reads the embedding row, and
// CTA 0 writes it to x as the residual stream's start.
__device__ void NormInto(const float* x, const __nv_bfloat16* x_bf16, float* x_out, const float* weight, int n,
                         float eps, float* xs, float* scratch) {
  float ss = 0.0f;
  for (int i = threadIdx.x * 4; i < n; i += kThreads * 4) {
    float4 v;
    if (x_bf16 != nullptr) {
      const uint2 raw = *reinterpret_cast<const uint2*>(x_bf16 + i);
      v = make_float4(__uint_as_float(raw.x << 16), __uint_as_float(raw.x & 0xffff0000u),
                      __uint_as_float(raw.y << 16), __uint_as_float(raw.y & 0xffff0000u));
      if (x_out != nullptr) *reinterpret_cast<float4*>(x_out + i) = v;
    } else {
      v = __ldcg(reinterpret_cast<const float4*>(x + i));
    }
    *reinterpret_cast<float4*>(xs + i) = v;
    ss += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  }
  ss = kernels::BlockSum(ss, scratch);
  const float inv = rsqrtf(ss / static_cast<float>(n) + eps);
  for (int i = threadIdx.x * 4; i < n; i += kThreads * 4) {
    float4 v = *reinterpret_cast<float4*>(xs + i);
    const float4 w = __ldg(reinterpret_cast<const float4*>(weight + i));
    v = make_float4(v.x * inv * w.x, v.y * inv * w.y, v.z * inv * w.z, v.w * inv * w.w);
    *reinterpret_cast<float4*>(xs + i) = v;
  }
  __syncthreads();
}

// xs = a float32 vector the kernel wrote (act).
__device__ void StageInto(const float* src, int n, float* xs) {
  for (int i = threadIdx.x * 4; i < n; i += kThreads * 4)
    *reinterpret_cast<float4*>(xs + i) = __ldcg(reinterpret_cast<const float4*>(src + i));
  __syncthreads();
}

// ---------------------------------------------------------------------------
// Attention.
__device__ __forceinline__ int Splits(int context) {
  return min(kPersistentDecodeMaxSplits, (context + kPersistentDecodeKeysPerSplit - 1) / kPersistentDecodeKeysPerSplit);
}

// Partial of (query head, split): [head_dim] unnormalised output, then max and sum (log2 domain).
__device__ __forceinline__ int64_t PartialOffset(int head, int split) {
  return (int64_t{head} * kPersistentDecodeMaxSplits + split) * (kHeadDim + 2);
}

// CTA (KV head h, split s) over keys [k0, k1): each warp up to
// kPersistentDecodeKeysPerWarp keys, all loaded at once; online softmax per
// query head in registers; the warps' partials merged through shared memory.
__device__ void AttentionPhase(const PersistentDecodeParams& p, const PersistentDecodeLayer& layer, float* smem) {
  const int context = __ldg(p.positions) + 1;
  if (context > kPersistentDecodeMaxContext) __trap();  // the host never launches these (keys would be dropped)
  const int splits = Splits(context);
  // The last CTAs of the grid: the first ones hold o_proj's rows.
  const int cta = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  if (cta >= p.num_kv_heads * splits) return;
  const int h = cta / splits, split = cta % splits;
  const int per = (context + splits - 1) / splits;
  const int k0 = split * per, k1 = min(context, k0 + per);
  const int group = p.num_heads / p.num_kv_heads;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int32_t* table = p.block_tables + __ldg(&p.items[0].block_table_offset);

  uint2 keys[kPersistentDecodeKeysPerWarp] = {}, values[kPersistentDecodeKeysPerWarp] = {};
#pragma unroll
  for (int i = 0; i < kPersistentDecodeKeysPerWarp; ++i) {
    const int key = k0 + warp + kWarps * i;
    if (key < k1) {
      const int block = __ldg(table + key / p.block_size), row = key % p.block_size;
      const int64_t at = ((int64_t{block} * p.num_kv_heads + h) * p.block_size + row) * kHeadDim + 4 * lane;
      keys[i] = __ldcg(reinterpret_cast<const uint2*>(layer.k_cache + at));
      values[i] = __ldcg(reinterpret_cast<const uint2*>(layer.v_cache + at));
    }
  }
  const float scale = p.attn_scale * kLog2e;
  float qv[kMaxGroup][4], m[kMaxGroup], l[kMaxGroup], acc[kMaxGroup][4];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
    acc[g][0] = acc[g][1] = acc[g][2] = acc[g][3] = 0.0f;
    qv[g][0] = qv[g][1] = qv[g][2] = qv[g][3] = 0.0f;
    if (g < group) {
      const float4 v = __ldcg(reinterpret_cast<const float4*>(p.q + (h * group + g) * kHeadDim + 4 * lane));
      qv[g][0] = v.x * scale;
      qv[g][1] = v.y * scale;
      qv[g][2] = v.z * scale;
      qv[g][3] = v.w * scale;
    }
  }
  auto widen = [](const uint2& r, float (&f)[4]) {
    f[0] = __uint_as_float(r.x << 16);
    f[1] = __uint_as_float(r.x & 0xffff0000u);
    f[2] = __uint_as_float(r.y << 16);
    f[3] = __uint_as_float(r.y & 0xffff0000u);
  };
#pragma unroll
  for (int i = 0; i < kPersistentDecodeKeysPerWarp; ++i) {
    if (k0 + warp + kWarps * i >= k1) break;  // warp-uniform
    float kf[4], vf[4];
    widen(keys[i], kf);
    widen(values[i], vf);
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
      if (g >= group) break;
      float s = qv[g][0] * kf[0];
      s = fmaf(qv[g][1], kf[1], s);
      s = fmaf(qv[g][2], kf[2], s);
      s = fmaf(qv[g][3], kf[3], s);
      s = kernels::WarpSum(s);
      const float m_new = fmaxf(m[g], s);
      const float correction = exp2f(m[g] - m_new), weight = exp2f(s - m_new);
      l[g] = l[g] * correction + weight;
#pragma unroll
      for (int d = 0; d < 4; ++d) acc[g][d] = fmaf(acc[g][d], correction, weight * vf[d]);
      m[g] = m_new;
    }
  }
  // smem: [warp][g][head_dim] outputs, then [warp][g] max and sum.
  float* out = smem;
  float* ms = smem + kWarps * kMaxGroup * kHeadDim;
  float* ls = ms + kWarps * kMaxGroup;
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    if (g >= group) break;
    *reinterpret_cast<float4*>(out + (warp * kMaxGroup + g) * kHeadDim + 4 * lane) =
        make_float4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]);
    if (lane == 0) {
      ms[warp * kMaxGroup + g] = m[g];
      ls[warp * kMaxGroup + g] = l[g];
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < group * kHeadDim; idx += kThreads) {
    const int g = idx / kHeadDim, d = idx % kHeadDim;
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, ms[w * kMaxGroup + g]);
    float num = 0.0f, den = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      const float mw = ms[w * kMaxGroup + g];
      if (mw == -INFINITY) continue;  // a warp without keys
      const float f = exp2f(mw - mx);
      num = fmaf(f, out[(w * kMaxGroup + g) * kHeadDim + d], num);
      den = fmaf(f, ls[w * kMaxGroup + g], den);
    }
    float* partial = p.partial + PartialOffset(h * group + g, split);
    partial[d] = num;
    if (d == 0) {
      partial[kHeadDim] = mx;
      partial[kHeadDim + 1] = den;
    }
  }
}

// xs[head * head_dim + d] = the splits' partials merged: every CTA does it
// for o_proj's input.
__device__ void MergeInto(const PersistentDecodeParams& p, float* xs) {
  const int splits = Splits(__ldg(p.positions) + 1);
  const int n = p.num_heads * kHeadDim;
  for (int idx = threadIdx.x; idx < n; idx += kThreads) {
    const int head = idx / kHeadDim, d = idx % kHeadDim;
    float mx = -INFINITY;
    for (int s = 0; s < splits; ++s) mx = fmaxf(mx, __ldcg(p.partial + PartialOffset(head, s) + kHeadDim));
    float num = 0.0f, den = 0.0f;
    for (int s = 0; s < splits; ++s) {
      const float* partial = p.partial + PartialOffset(head, s);
      const float f = exp2f(__ldcg(partial + kHeadDim) - mx);
      num = fmaf(f, __ldcg(partial + d), num);
      den = fmaf(f, __ldcg(partial + kHeadDim + 1), den);
    }
    xs[idx] = num / den;
  }
  __syncthreads();
}

// ---------------------------------------------------------------------------
struct Phases {
  Linear qkv, o, gate_up, down, lm_head;
};

// (No designated initializers in device code: nvcc's C++17 mode zeroes the
// members they skip instead of giving them their default values.)
__device__ __forceinline__ Linear MakeLinear(const __nv_bfloat16* w, const float* bias, int groups, int pair,
                                             int row_stride, int pair_offset, int k, int max_slots, Epilogue epilogue) {
  Linear L;
  L.w = w;
  L.bias = bias;
  L.groups = groups;
  L.pair = pair;
  L.row_stride = row_stride;
  L.pair_offset = pair_offset;
  L.k = k;
  L.max_slots = max_slots;
  L.epilogue = epilogue;
  return L;
}

__device__ __forceinline__ Phases LayerPhases(const PersistentDecodeParams& p, const PersistentDecodeLayer& l) {
  const int q_size = p.num_heads * kHeadDim, kv_size = p.num_kv_heads * kHeadDim;
  Phases ph;
  ph.qkv = MakeLinear(l.qkv, l.qkv_bias, (q_size + 2 * kv_size) / 2, 2, 2, 1, p.hidden, kSlots, Epilogue::kRotaryQkv);
  ph.o = MakeLinear(l.o_proj, l.o_bias, p.hidden, 1, 1, 0, q_size, kSlots, Epilogue::kAddResidual);
  ph.gate_up = MakeLinear(l.gate_up, l.gate_up_bias, p.intermediate, 2, 1, p.intermediate, p.hidden, kSlots,
                          Epilogue::kSiluMul);
  ph.down = MakeLinear(l.down, l.down_bias, p.hidden, 1, 1, 0, p.intermediate, kSlots, Epilogue::kAddResidual);
  ph.lm_head = MakeLinear(p.lm_head, nullptr, p.vocab, 1, 1, 0, p.hidden, kHalfSlots, Epilogue::kLogits);
  return ph;
}

__device__ __forceinline__ EpilogueArgs OutTo(float* out) {
  EpilogueArgs a;
  a.out = out;
  return a;
}

__global__ void __launch_bounds__(kThreads, 1) PersistentDecodeKernel(PersistentDecodeParams p) {
  extern __shared__ __align__(16) float smem[];  // xs, or the attention's merge space
  __shared__ float row_sums[kWarps][kSlots];
  __shared__ float scratch[32];
  float* my_rows = row_sums[threadIdx.x / 32];
  WarpSlots slots = {};

  const int32_t token = __ldg(p.token_ids);
  Phases ph = LayerPhases(p, p.layers[0]);
  Issue(ph.qkv, 0, slots);
  for (int layer = 0; layer < p.num_layers; ++layer) {
    const PersistentDecodeLayer& l = p.layers[layer];
    // 1. q|k|v with rotary; k and v to the cache.
    if (layer == 0) {
      NormInto(nullptr, p.embed + int64_t{token} * p.hidden, blockIdx.x == 0 ? p.x : nullptr, l.input_norm, p.hidden,
               p.eps, smem, scratch);
    } else {
      NormInto(p.x, nullptr, nullptr, l.input_norm, p.hidden, p.eps, smem, scratch);
    }
    EpilogueArgs qkv_out = OutTo(p.q);
    qkv_out.rotary.positions = p.positions;
    qkv_out.rotary.slots = p.slots;
    qkv_out.rotary.inv_freq = p.inv_freq;
    qkv_out.rotary.cache.k = l.k_cache;
    qkv_out.rotary.cache.v = l.v_cache;
    qkv_out.rotary.cache.num_blocks = p.num_blocks;
    qkv_out.rotary.cache.num_kv_heads = p.num_kv_heads;
    qkv_out.rotary.cache.block_size = p.block_size;
    qkv_out.rotary.cache.head_dim = kHeadDim;
    qkv_out.rotary.num_heads = p.num_heads;
    RunLinear(ph.qkv, slots, smem, my_rows, qkv_out);
    GridBarrier(p.barrier);
    // 2. Attention partials, then o_proj's weights requested (after: the
    // attention's registers and the weights' do not fit together).
    AttentionPhase(p, l, smem);
    Issue(ph.o, 0, slots);
    GridBarrier(p.barrier);
    // 3. x += attn W_o^T.
    MergeInto(p, smem);
    RunLinear(ph.o, slots, smem, my_rows, OutTo(p.x));
    Issue(ph.gate_up, 0, slots);
    GridBarrier(p.barrier);
    // 4. act = silu(gate) * up of RMSNorm(x).
    NormInto(p.x, nullptr, nullptr, l.post_attn_norm, p.hidden, p.eps, smem, scratch);
    RunLinear(ph.gate_up, slots, smem, my_rows, OutTo(p.act));
    Issue(ph.down, 0, slots);
    GridBarrier(p.barrier);
    // 5. x += act W_down^T.
    StageInto(p.act, p.intermediate, smem);
    RunLinear(ph.down, slots, smem, my_rows, OutTo(p.x));
    const bool last = layer + 1 == p.num_layers;
    if (!last) {
      ph = LayerPhases(p, p.layers[layer + 1]);
      Issue(ph.qkv, 0, slots);
    } else if (p.logits != nullptr) {
      if (threadIdx.x < kBarrierThread) IssueHalf(ph.lm_head, 0, 0, slots.half[0]);
    }
    GridBarrier(p.barrier);
  }
  if (p.logits == nullptr) return;
  NormInto(p.x, nullptr, nullptr, p.final_norm, p.hidden, p.eps, smem, scratch);
  RunLinear(ph.lm_head, slots, smem, my_rows, OutTo(p.logits));
}

int32_t SharedFloats(const PersistentDecodeParams& p) {
  const int32_t attention = kWarps * kMaxGroup * (kHeadDim + 2);
  const int32_t widest = std::max({p.hidden, p.num_heads * kHeadDim, p.intermediate});
  return std::max(attention, widest);
}

int g_ctas = 0;  // one a SM, set by PreparePersistentDecode

bool ShapeFits(const PersistentDecodeParams& p, const char** why) {
  auto no = [&](const char* reason) {
    if (why != nullptr) *why = reason;
    return false;
  };
  if (p.head_dim != kHeadDim) return no("head_dim is not 128");
  if (p.num_kv_heads < 1 || p.num_heads % p.num_kv_heads != 0 || p.num_heads / p.num_kv_heads > kMaxGroup)
    return no("more than 8 query heads a KV head");
  if (p.hidden % 256 != 0 || p.hidden > 4096) return no("hidden is not a multiple of 256 up to 4,096");
  if (p.intermediate % 256 != 0 || p.intermediate > 4096) return no("intermediate is not a multiple of 256 up to 4,096");
  // One round of a linear must hold at least one group: rows of k / 256
  // slots, two rows a pair, 16 slots (8 for the lm_head).
  if (2 * (p.hidden / 256) > kSlots) return no("hidden over 2,048 (gate|up and qkv pairs)");
  if ((p.num_heads * kHeadDim) / 256 > kSlots) return no("query width over 4,096");
  if (p.hidden / 256 > kHalfSlots) return no("hidden over 2,048 (lm_head rounds)");
  if (p.num_layers < 1 || p.vocab < 1 || p.block_size < 1) return no("empty model or cache");
  return true;
}

}  // namespace

bool PreparePersistentDecode(const PersistentDecodeParams& shape, const char** why) {
  if (!ShapeFits(shape, why)) return false;
  int device = 0, sms = 0, optin = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
    if (why != nullptr) *why = "device attributes unavailable";
    return false;
  }
  int cooperative = 0;
  if (cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device) != cudaSuccess || cooperative == 0) {
    if (why != nullptr) *why = "no cooperative launch on this device";
    return false;
  }
  const size_t bytes = static_cast<size_t>(SharedFloats(shape)) * sizeof(float);
  if (bytes > static_cast<size_t>(optin) ||
      cudaFuncSetAttribute(PersistentDecodeKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(bytes)) != cudaSuccess) {
    if (why != nullptr) *why = "shared memory over the device's limit";
    return false;
  }
  int resident = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&resident, PersistentDecodeKernel, kThreads, bytes) !=
          cudaSuccess ||
      resident < 1) {
    if (why != nullptr) *why = "a CTA of 512 threads does not fit an SM";
    return false;
  }
  if (shape.num_kv_heads * kPersistentDecodeMaxSplits > sms) {
    if (why != nullptr) *why = "more KV heads x splits than SMs";
    return false;
  }
  g_ctas = sms;
  return true;
}

cudaError_t LaunchPersistentDecode(const PersistentDecodeParams& p, cudaStream_t stream) {
  if (g_ctas == 0 || !ShapeFits(p, nullptr)) return cudaErrorInvalidValue;
  if (p.layers == nullptr || p.embed == nullptr || p.lm_head == nullptr || p.final_norm == nullptr ||
      p.inv_freq == nullptr || p.token_ids == nullptr || p.positions == nullptr || p.slots == nullptr ||
      p.items == nullptr || p.block_tables == nullptr || p.x == nullptr || p.q == nullptr || p.act == nullptr ||
      p.partial == nullptr || p.barrier == nullptr)
    return cudaErrorInvalidValue;
  cudaLaunchAttribute cooperative;
  cooperative.id = cudaLaunchAttributeCooperative;
  cooperative.val.cooperative = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(g_ctas));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = static_cast<size_t>(SharedFloats(p)) * sizeof(float);
  config.stream = stream;
  config.attrs = &cooperative;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, PersistentDecodeKernel, p);
}

}  // namespace ernie::cuda
