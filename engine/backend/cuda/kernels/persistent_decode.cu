// The persistent one-token decode step (see persistent_decode.h).
//
// Layout of the work. The grid is one CTA of 16 warps on every SM; 15 of
// them take linear units (Linear below: each CTA a contiguous share of a
// linear's output groups, its weights copied a round ahead into a
// shared-memory ring by bulk copies), the 16th arrives at the grid
// barriers. Everything the kernel itself writes (x, q, act, partial, the
// new cache row) is read back with ld.global.cg: the L1s are not coherent
// between SMs.
#include <algorithm>
#include <cfloat>

#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/decode_epilogue.cuh"
#include "engine/backend/cuda/kernels/persistent_decode.h"
#include "engine/backend/cuda/kernels/tma.cuh"

namespace ernie::cuda {
namespace {

constexpr int kWarps = 16;
constexpr int kThreads = kWarps * 32;
// Warps 0 - 14 take the linears' rows; warp 15 arrives at the barriers, so
// the arriving thread's fence never waits on weight loads in flight.
constexpr int kLinearWarps = kWarps - 1;
constexpr int kBarrierThread = kLinearWarps * 32;
constexpr int kMaxRoundSlots = 16;  // units a linear warp takes a round, at most
constexpr int kHeadDim = 128;  // a lane holds 4 dims of a head
constexpr int kMaxGroup = 8;   // query heads a KV head
constexpr float kLog2e = 1.4426950408889634f;
constexpr int kPhasesPerLayer = 5;  // grid barriers a layer

// ---------------------------------------------------------------------------
// Grid barrier: one 64-bit arrival counter that only grows (no reset, so a
// graph replays the kernel as is). A launch makes `barriers` x gridDim.x
// arrivals, so at a CTA's start the counter is a whole number of launches
// plus at most gridDim.x - 1 arrivals at this launch's first barrier (none
// can pass it before this CTA arrives): that gives the launch's base. The
// arrival is CUTLASS's pattern (arch/barrier.h): the CTA's threads meet,
// one thread fences (acq_rel) and adds without waiting for the result, then
// polls with acquire loads.
__device__ __forceinline__ unsigned long long LoadAcquire(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ unsigned long long LoadRelaxed(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

struct GridBarrier {
  unsigned long long* counter;
  unsigned long long target;  // kBarrierThread's: the count the next barrier waits for

  __device__ GridBarrier(unsigned long long* c, int barriers) : counter(c), target(0) {
    if (threadIdx.x == kBarrierThread) {
      const unsigned long long per_launch = static_cast<unsigned long long>(barriers) * gridDim.x;
      const unsigned long long v = LoadAcquire(counter);
      target = v - v % per_launch + gridDim.x;
    }
  }

  __device__ __forceinline__ void Sync() {
    __syncthreads();
    if (threadIdx.x == kBarrierThread) {
      asm volatile("fence.acq_rel.gpu;\n\tred.relaxed.gpu.global.add.u64 [%0], 1;" ::"l"(counter) : "memory");
      // A CTA that never arrives (a bug, not a state of the inputs) would
      // hang the device; trap instead, which fails the launch.
      // Relaxed polls with a short sleep between them: 131 threads hammering
      // one L2 line with acquire loads slow the CTAs still working.
      uint32_t spins = 0;
      while (LoadRelaxed(counter) < target) {
        __nanosleep(32);
        if (++spins == (1u << 28)) __trap();
      }
      asm volatile("fence.acq_rel.gpu;" ::: "memory");
      target += gridDim.x;
    }
    __syncthreads();
  }
};

// ---------------------------------------------------------------------------
// 8 bf16 weights . 8 float32 inputs from shared memory.
__device__ __forceinline__ float Dot8(const uint4& w, const float* x) {
  const float4 a = *reinterpret_cast<const float4*>(x);
  const float4 b = *reinterpret_cast<const float4*>(x + 4);
  using kernels::Bf16Hi, kernels::Bf16Lo;
  float s = Bf16Lo(w.x) * a.x;
  s = fmaf(Bf16Hi(w.x), a.y, s);
  s = fmaf(Bf16Lo(w.y), a.z, s);
  s = fmaf(Bf16Hi(w.y), a.w, s);
  s = fmaf(Bf16Lo(w.z), b.x, s);
  s = fmaf(Bf16Hi(w.z), b.y, s);
  s = fmaf(Bf16Lo(w.w), b.z, s);
  s = fmaf(Bf16Hi(w.w), b.w, s);
  return s;
}

enum class Epilogue { kRotaryQkv, kAddResidual, kSiluMul, kLogits };

// One linear phase. Its outputs come in groups (one row, or the two rows one
// output needs), and CTA c owns the contiguous groups [c G / C, (c+1) G / C),
// so every SM streams an equal share of the weights. A unit is 256 weights
// of one row (32 lanes x 8); the CTA's units, group by group, row by row,
// chunk by chunk, are dealt to its 15 linear warps in turn (unit u to warp
// u % 15, its register slot u / 15), a round being as many whole groups as
// 15 x max_slots units hold.
struct Linear {
  const __nv_bfloat16* w = nullptr;
  const float* bias = nullptr;
  int32_t groups = 0;      // output groups
  int32_t pair = 1;        // rows a group: 1 or 2
  int32_t row_stride = 1;  // first row of group g: g * row_stride
  int32_t pair_offset = 0; // second row: first + pair_offset
  int32_t k = 0;           // a multiple of 256
  int32_t max_slots = 0;   // units a linear warp takes a round (the ring's slots: PersistentDecodeParams::round_slots)
  Epilogue epilogue = Epilogue::kAddResidual;

  __device__ int chunks() const { return k >> 8; }
  __device__ int units_per_group() const { return pair * chunks(); }
  __device__ int groups_per_round() const { return max(1, kLinearWarps * max_slots / units_per_group()); }
  // This CTA's groups [first, end) (blockIdx.x x groups stays under 2^31:
  // ShapeFits bounds the vocab).
  __device__ int first_group() const { return static_cast<int>(blockIdx.x) * groups / static_cast<int>(gridDim.x); }
  __device__ int end_group() const {
    return static_cast<int>(blockIdx.x + 1) * groups / static_cast<int>(gridDim.x);
  }
  __device__ int rounds() const { return (end_group() - first_group() + groups_per_round() - 1) / groups_per_round(); }
};

// u / d for u, d < 2^16 by a multiply: m = floor((2^32 - 1) / d) + 1 gives
// floor(u m / 2^32) = floor(u / d) exactly while u d < 2^32.
struct SmallDivisor {
  uint32_t d = 1, m = 0;
  __device__ explicit SmallDivisor(uint32_t divisor) : d(divisor), m(0xffffffffu / divisor + 1) {}
  __device__ __forceinline__ uint32_t Div(uint32_t u) const { return d == 1 ? u : __umulhi(u, m); }
};

// One round of a linear on this CTA, worked out once (the per-unit walk
// divides by multiplies): its first group, its units, and how a unit
// index splits into (group, row of the pair, chunk).
struct RoundPlan {
  int first_group, units, spr;
  SmallDivisor by_group, by_chunks;
  __device__ RoundPlan(const Linear& L, int round)
      : spr(L.chunks()), by_group(static_cast<uint32_t>(L.units_per_group())),
        by_chunks(static_cast<uint32_t>(L.chunks())) {
    const int gpr = L.groups_per_round();
    first_group = L.first_group() + round * gpr;
    units = max(0, min(gpr, L.end_group() - first_group)) * L.units_per_group();
  }
  __device__ __forceinline__ void Unit(const Linear& L, int u, int64_t& row, int& chunk) const {
    const int gi = static_cast<int>(by_group.Div(static_cast<uint32_t>(u)));
    const int rem = u - gi * static_cast<int>(by_group.d);
    const int e = static_cast<int>(by_chunks.Div(static_cast<uint32_t>(rem)));
    chunk = rem - e * spr;
    row = int64_t{first_group + gi} * L.row_stride + e * L.pair_offset;
  }
};

// The weight ring in shared memory: two buffers of max_slots x 15 units of
// 512 bytes, one mbarrier each. A round's units sit in unit order, and the
// units of a row are its chunks in order, so each row of the round is one
// contiguous run of k x 2 bytes in the buffer: one bulk copy (the TMA
// engine moves it; a lane of warp 0 issues it) credited to the buffer's
// mbarrier. Lane l of a warp reads bytes 16 l .. 16 l + 15 of its units.
__device__ __forceinline__ uint4* UnitSlot(uint4* ring, const Linear& L, int buf, int u) {
  return ring + (static_cast<int64_t>(buf) * L.max_slots * kLinearWarps + u) * 32 + threadIdx.x % 32;
}

// Round `round` of L into ring buffer `buf` (warp 0 issues; the others pass).
// The buffer's last readers are past a __syncthreads (FinishRound's).
__device__ __forceinline__ void IssueRound(const Linear& L, int round, int buf, uint4* ring, uint64_t* bars) {
  if (threadIdx.x >= 32) return;
  const int lane = threadIdx.x;
  const RoundPlan plan(L, round);
  const int rows = plan.units / plan.spr;
  if (lane == 0) {
    // The generic reads of the buffer's last round before the copies' writes.
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    kernels::MbarrierArriveExpectBytes(&bars[buf], static_cast<uint32_t>(plan.units) * 512u);
  }
  __syncwarp();
  const uint32_t row_bytes = static_cast<uint32_t>(L.k) * 2u;
  const uint32_t bar = static_cast<uint32_t>(__cvta_generic_to_shared(&bars[buf]));
  for (int ri = lane; ri < rows; ri += 32) {
    const int gi = L.pair == 2 ? ri >> 1 : ri, e = L.pair == 2 ? ri & 1 : 0;
    const int64_t row = int64_t{plan.first_group + gi} * L.row_stride + e * L.pair_offset;
    const uint4* dst = ring + (static_cast<int64_t>(buf) * L.max_slots * kLinearWarps + ri * plan.spr) * 32;
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
            static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
        "l"(L.w + row * L.k), "r"(row_bytes), "r"(bar)
        : "memory");
  }
}

// Each of the round's units (its copy complete) against xs, summed over the
// warp, into unit_sums[u]: four units at a time, so their reductions'
// shuffles overlap instead of running one unit's chain after another.
__device__ __forceinline__ void DotsRound(const Linear& L, const RoundPlan& plan, int buf, uint4* ring,
                                          const float* xs, float* unit_sums) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (warp >= kLinearWarps) return;
  constexpr int kBatch = 4;
  for (int u0 = warp; u0 < plan.units; u0 += kBatch * kLinearWarps) {
    float d[kBatch];
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int u = u0 + i * kLinearWarps;
      d[i] = 0.0f;
      if (u < plan.units) {
        int64_t row;
        int chunk;
        plan.Unit(L, u, row, chunk);
        d[i] = Dot8(*UnitSlot(ring, L, buf, u), xs + chunk * 256 + 8 * lane);
      }
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1)
#pragma unroll
      for (int i = 0; i < kBatch; ++i) d[i] += __shfl_xor_sync(kernels::kFullMask, d[i], offset);
    if (lane == 0)
#pragma unroll
      for (int i = 0; i < kBatch; ++i)
        if (u0 + i * kLinearWarps < plan.units) unit_sums[u0 + i * kLinearWarps] = d[i];
  }
}

struct EpilogueArgs {
  float* out = nullptr;  // kAddResidual: x; kSiluMul: act; kLogits: logits; kRotaryQkv: q
  DecodeRotaryKv rotary;
};

// The round's outputs, a thread a group, from the unit sums (the whole CTA).
__device__ __forceinline__ void FinishRound(const Linear& L, const RoundPlan& plan, const float* unit_sums,
                                            const EpilogueArgs& a) {
  __syncthreads();
  const int spr = plan.spr, upg = static_cast<int>(plan.by_group.d), groups = plan.units / upg;
  for (int t = threadIdx.x; t < groups; t += kThreads) {
    const int group = plan.first_group + t;
    const int64_t row = int64_t{group} * L.row_stride;
    const float* sums = unit_sums + t * upg;
    float va = 0.0f, vb = 0.0f;
    for (int c = 0; c < spr; ++c) va += sums[c];
    if (L.pair == 2)
      for (int c = 0; c < spr; ++c) vb += sums[spr + c];
    if (L.bias != nullptr) va += __ldg(L.bias + row);
    if (L.bias != nullptr && L.pair == 2) vb += __ldg(L.bias + row + L.pair_offset);
    switch (L.epilogue) {
      case Epilogue::kAddResidual:
        a.out[group] = __ldcg(a.out + group) + va;
        break;
      case Epilogue::kLogits:
        a.out[group] = va;
        break;
      case Epilogue::kSiluMul:
        a.out[group] = kernels::Silu(va) * vb;
        break;
      case Epilogue::kRotaryQkv:
        kernels::RotaryKvStore(a.rotary, a.out, /*n=*/0, /*r=*/0, row, va, vb);
        break;
    }
  }
  __syncthreads();  // unit_sums is the next round's
}

// ---------------------------------------------------------------------------
// xs = RMSNorm(x) * weight in float32, by the whole CTA (every CTA computes
// the same row). `x_bf16` instead of x: layer 0 reads the embedding row, and
// CTA 0 writes it to x as the residual stream's start.
__device__ __forceinline__ void NormInto(const float* x, const __nv_bfloat16* x_bf16, float* x_out, const float* weight, int n,
                         float eps, float* xs, float* scratch) {
  float ss = 0.0f;
  for (int i = threadIdx.x * 4; i < n; i += kThreads * 4) {
    float4 v;
    if (x_bf16 != nullptr) {
      const uint2 raw = *reinterpret_cast<const uint2*>(x_bf16 + i);
      v = make_float4(kernels::Bf16Lo(raw.x), kernels::Bf16Hi(raw.x), kernels::Bf16Lo(raw.y), kernels::Bf16Hi(raw.y));
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
__device__ __forceinline__ void StageInto(const float* src, int n, float* xs) {
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
// (A stride of head_dim + 4 floats keeps every partial 16-byte aligned.)
__device__ __forceinline__ int64_t PartialOffset(int head, int split) {
  return (int64_t{head} * kPersistentDecodeMaxSplits + split) * (kHeadDim + 4);
}

// CTA (KV head h, split s) over keys [k0, k1), at most 64 of them: warp w
// takes query head w % group over the keys' half w / group, a lane a key.
// Each lane's score is a whole 128-dim dot (its key row's 256 bytes
// requested at once), the warp's softmax two reductions, and the output a
// walk over the warp's keys with the lanes over dims (4 each). The two
// halves of each head meet in shared memory.
__device__ __forceinline__ void AttentionPhase(const PersistentDecodeParams& p, const PersistentDecodeLayer& layer,
                                               float* smem) {
  const int context = __ldg(p.positions) + 1;
  if (context > kPersistentDecodeMaxContext) __trap();  // the host never launches these (keys would be dropped)
  const int splits = Splits(context);
  // The last CTAs of the grid (the linears' rows are spread over all of them).
  const int cta = static_cast<int>(gridDim.x - 1 - blockIdx.x);
  if (cta >= p.num_kv_heads * splits) return;
  const int h = cta / splits, split = cta % splits;
  const int per = (context + splits - 1) / splits;
  const int k0 = split * per, k1 = min(context, k0 + per);
  const int group = p.num_heads / p.num_kv_heads;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = warp % group, half = warp / group;
  const bool active = half < 2;  // warps past 2 x group have no work
  const int first_key = k0 + 32 * half;
  const int32_t* table = p.block_tables + __ldg(&p.items[0].block_table_offset);

  // smem: [16 warps][head_dim] outputs, [16] maxima, [16] sums, then [group][head_dim] queries.
  float* out = smem;
  float* ms = out + kWarps * kHeadDim;
  float* ls = ms + kWarps;
  float* qs = ls + kWarps;

  // This lane's key: where its row sits (the V walk borrows every lane's).
  const int key = first_key + lane;
  const bool has_key = active && key < k1;
  int64_t row_at = 0;
  uint4 k_row[kHeadDim / 8];
  if (has_key) {
    const int block = __ldg(table + key / p.block_size);
    row_at = ((int64_t{block} * p.num_kv_heads + h) * p.block_size + key % p.block_size) * kHeadDim;
    const uint4* src = reinterpret_cast<const uint4*>(layer.k_cache + row_at);
#pragma unroll
    for (int i = 0; i < kHeadDim / 8; ++i) k_row[i] = __ldcg(src + i);
  } else {
#pragma unroll
    for (int i = 0; i < kHeadDim / 8; ++i) k_row[i] = make_uint4(0, 0, 0, 0);
  }
  const float scale = p.attn_scale * kLog2e;
  for (int i = threadIdx.x; i < group * kHeadDim / 4; i += kThreads) {
    float4 v = __ldcg(reinterpret_cast<const float4*>(p.q + h * group * kHeadDim) + i);
    v.x *= scale;
    v.y *= scale;
    v.z *= scale;
    v.w *= scale;
    reinterpret_cast<float4*>(qs)[i] = v;
  }
  __syncthreads();

  float m = -INFINITY, l = 0.0f, acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  if (active && first_key < k1) {  // warp-uniform
    const float* q = qs + g * kHeadDim;
    float score = 0.0f;
#pragma unroll
    for (int i = 0; i < kHeadDim / 8; ++i) score += Dot8(k_row[i], q + 8 * i);
    score = has_key ? score : -INFINITY;
    m = kernels::WarpMax(score);  // finite: lane 0 has a key
    const float weight = has_key ? exp2f(score - m) : 0.0f;
    l = kernels::WarpSum(weight);
    const int keys = min(32, k1 - first_key);
    for (int j0 = 0; j0 < keys; j0 += 16) {  // 16 values requested at once: each round one L2 round trip
      uint2 v[16];
      float w[16];
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const int64_t at = __shfl_sync(kernels::kFullMask, row_at, j0 + j);
        w[j] = __shfl_sync(kernels::kFullMask, weight, j0 + j);
        v[j] = j0 + j < keys ? __ldcg(reinterpret_cast<const uint2*>(layer.v_cache + at) + lane) : make_uint2(0, 0);
      }
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        acc[0] = fmaf(w[j], kernels::Bf16Lo(v[j].x), acc[0]);
        acc[1] = fmaf(w[j], kernels::Bf16Hi(v[j].x), acc[1]);
        acc[2] = fmaf(w[j], kernels::Bf16Lo(v[j].y), acc[2]);
        acc[3] = fmaf(w[j], kernels::Bf16Hi(v[j].y), acc[3]);
      }
    }
  }
  *reinterpret_cast<float4*>(out + warp * kHeadDim + 4 * lane) = make_float4(acc[0], acc[1], acc[2], acc[3]);
  if (lane == 0) {
    ms[warp] = m;
    ls[warp] = l;
  }
  __syncthreads();
  // Head g's two halves: warps g and group + g (the second may have no keys).
  for (int idx = threadIdx.x; idx < group * kHeadDim; idx += kThreads) {
    const int hg = idx / kHeadDim, d = idx % kHeadDim;
    const float m0 = ms[hg], m1 = ms[group + hg];
    const float mx = fmaxf(m0, m1);
    const float f0 = exp2f(m0 - mx), f1 = m1 == -INFINITY ? 0.0f : exp2f(m1 - mx);
    float* partial = p.partial + PartialOffset(h * group + hg, split);
    partial[d] = f0 * out[hg * kHeadDim + d] + f1 * out[(group + hg) * kHeadDim + d];
    if (d == 0) {
      partial[kHeadDim] = mx;
      partial[kHeadDim + 1] = f0 * ls[hg] + f1 * ls[group + hg];
    }
  }
}

// xs[head * head_dim + d] = the splits' partials merged: every CTA does it
// for o_proj's input, in two rounds of loads: every (head, split)'s max and
// sum into shared memory (after xs), then a float4 of dims a thread with
// all its splits' partial outputs requested at once.
__device__ __forceinline__ void MergeInto(const PersistentDecodeParams& p, float* xs) {
  const int splits = Splits(__ldg(p.positions) + 1);
  const int n = p.num_heads * kHeadDim;
  float* ml = xs + n;  // [head][split] (max, sum)
  for (int t = threadIdx.x; t < p.num_heads * splits; t += kThreads) {
    const int head = t / splits, split = t % splits;
    const float2 v = __ldcg(reinterpret_cast<const float2*>(p.partial + PartialOffset(head, split) + kHeadDim));
    ml[2 * (head * kPersistentDecodeMaxSplits + split)] = v.x;
    ml[2 * (head * kPersistentDecodeMaxSplits + split) + 1] = v.y;
  }
  __syncthreads();
  for (int item = threadIdx.x; item < n / 4; item += kThreads) {
    const int head = item * 4 / kHeadDim, d = item * 4 % kHeadDim;
    float4 part[kPersistentDecodeMaxSplits];
#pragma unroll
    for (int s = 0; s < kPersistentDecodeMaxSplits; ++s)
      part[s] = s < splits ? __ldcg(reinterpret_cast<const float4*>(p.partial + PartialOffset(head, s) + d))
                           : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float* hml = ml + 2 * head * kPersistentDecodeMaxSplits;
    float mx = -INFINITY;
    for (int s = 0; s < splits; ++s) mx = fmaxf(mx, hml[2 * s]);
    float4 num = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float den = 0.0f;
#pragma unroll
    for (int s = 0; s < kPersistentDecodeMaxSplits; ++s) {
      if (s >= splits) break;
      const float f = exp2f(hml[2 * s] - mx);
      num.x = fmaf(f, part[s].x, num.x);
      num.y = fmaf(f, part[s].y, num.y);
      num.z = fmaf(f, part[s].z, num.z);
      num.w = fmaf(f, part[s].w, num.w);
      den = fmaf(f, hml[2 * s + 1], den);
    }
    const float inv = 1.0f / den;
    *reinterpret_cast<float4*>(xs + 4 * item) = make_float4(num.x * inv, num.y * inv, num.z * inv, num.w * inv);
  }
  __syncthreads();
}

// ---------------------------------------------------------------------------
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

// Each phase's linear, made where it is used (kept across the loop, five
// of them spilled registers).
__device__ __forceinline__ Linear QkvOf(const PersistentDecodeParams& p, const PersistentDecodeLayer& l) {
  const int width = (p.num_heads + 2 * p.num_kv_heads) * kHeadDim;
  return MakeLinear(l.qkv, l.qkv_bias, width / 2, 2, 2, 1, p.hidden, p.round_slots, Epilogue::kRotaryQkv);
}
__device__ __forceinline__ Linear OProjOf(const PersistentDecodeParams& p, const PersistentDecodeLayer& l) {
  return MakeLinear(l.o_proj, l.o_bias, p.hidden, 1, 1, 0, p.num_heads * kHeadDim, p.round_slots,
                    Epilogue::kAddResidual);
}
__device__ __forceinline__ Linear GateUpOf(const PersistentDecodeParams& p, const PersistentDecodeLayer& l) {
  return MakeLinear(l.gate_up, l.gate_up_bias, p.intermediate, 2, 1, p.intermediate, p.hidden, p.round_slots,
                    Epilogue::kSiluMul);
}
__device__ __forceinline__ Linear DownOf(const PersistentDecodeParams& p, const PersistentDecodeLayer& l) {
  return MakeLinear(l.down, l.down_bias, p.hidden, 1, 1, 0, p.intermediate, p.round_slots, Epilogue::kAddResidual);
}
__device__ __forceinline__ Linear LmHeadOf(const PersistentDecodeParams& p) {
  return MakeLinear(p.lm_head, nullptr, p.vocab, 1, 1, 0, p.hidden, p.round_slots, Epilogue::kLogits);
}

// The weight stream: every linear round of the step in order (qkv, o_proj,
// gate|up, down of each layer, then the lm_head's rounds), each copied into
// the ring one round ahead of its use, so a round's weights load during
// the round before it (and the barriers, attention and norms between).
enum class Which : int { kQkv, kOProj, kGateUp, kDown, kLmHead, kNone };

struct Cursor {
  int layer = 0;
  Which which = Which::kQkv;
  int round = 0;
};

__device__ __forceinline__ Linear LinearAt(const PersistentDecodeParams& p, const Cursor& c) {
  switch (c.which) {
    case Which::kQkv: return QkvOf(p, p.layers[c.layer]);
    case Which::kOProj: return OProjOf(p, p.layers[c.layer]);
    case Which::kGateUp: return GateUpOf(p, p.layers[c.layer]);
    case Which::kDown: return DownOf(p, p.layers[c.layer]);
    default: return LmHeadOf(p);
  }
}

__device__ __forceinline__ Cursor Next(const PersistentDecodeParams& p, Cursor c, int rounds, bool lm_head) {
  if (c.round + 1 < rounds) {
    ++c.round;
    return c;
  }
  c.round = 0;
  switch (c.which) {
    case Which::kQkv: c.which = Which::kOProj; break;
    case Which::kOProj: c.which = Which::kGateUp; break;
    case Which::kGateUp: c.which = Which::kDown; break;
    case Which::kDown:
      if (c.layer + 1 < p.num_layers) {
        ++c.layer;
        c.which = Which::kQkv;
      } else {
        c.which = lm_head ? Which::kLmHead : Which::kNone;
      }
      break;
    default: c.which = Which::kNone;
  }
  return c;
}

struct WeightStream {
  uint4* ring;
  uint64_t* bars;          // [2] one mbarrier a buffer
  uint32_t parities = 0;   // bit b: the phase parity buffer b's next wait is for
  Cursor at;     // the round whose weights are (being) copied into buffer `buf`
  int buf = 0;
  bool lm_head;  // the stream ends with the lm_head's rounds
};

// The linear at the stream's head, all its rounds (every thread of the CTA
// calls it): each round first starts the copy of the round after it, then
// waits for its own, takes its units' dots and finishes its outputs.
__device__ __forceinline__ void RunLinear(const PersistentDecodeParams& p, WeightStream& s, const float* xs,
                                          float* unit_sums, const EpilogueArgs& a) {
  const Linear L = LinearAt(p, s.at);
  const int rounds = L.rounds();
  for (int r = 0; r < rounds; ++r) {
    const Cursor next = Next(p, s.at, rounds, s.lm_head);
    if (next.which != Which::kNone) IssueRound(LinearAt(p, next), next.round, s.buf ^ 1, s.ring, s.bars);
    if (threadIdx.x < kBarrierThread) kernels::MbarrierWait(&s.bars[s.buf], (s.parities >> s.buf) & 1u);
    s.parities ^= 1u << s.buf;
    const RoundPlan plan(L, r);
    DotsRound(L, plan, s.buf, s.ring, xs, unit_sums);
    FinishRound(L, plan, unit_sums, a);
    s.buf ^= 1;
    s.at = next;
  }
}

__device__ __forceinline__ EpilogueArgs OutTo(float* out) {
  EpilogueArgs a;
  a.out = out;
  return a;
}

__global__ void __launch_bounds__(kThreads, 1) PersistentDecodeKernel(PersistentDecodeParams p) {
  // Dynamic shared memory: the weight ring, then xs (or the attention's space).
  extern __shared__ __align__(16) uint4 dynamic_smem[];
  float* smem = reinterpret_cast<float*>(dynamic_smem + 2 * p.round_slots * kLinearWarps * 32);
  __shared__ float unit_sums[kLinearWarps * kMaxRoundSlots];
  __shared__ float scratch[32];

  const int32_t token = __ldg(p.token_ids);
  GridBarrier barrier(p.barrier, kPhasesPerLayer * p.num_layers);
  const bool attention = (p.skip & kPersistentDecodeSkipAttention) == 0;
  const bool norms = (p.skip & kPersistentDecodeSkipNorms) == 0;
  const bool linears = (p.skip & kPersistentDecodeSkipLinears) == 0;
  const bool lm_head = p.logits != nullptr && (p.skip & kPersistentDecodeSkipLmHead) == 0;
  __shared__ __align__(8) uint64_t ring_bars[2];
  if (threadIdx.x == 0) {
    kernels::MbarrierInit(&ring_bars[0], 1);
    kernels::MbarrierInit(&ring_bars[1], 1);
    kernels::FenceMbarrierInit();
  }
  __syncthreads();
  WeightStream weights;
  weights.ring = dynamic_smem;
  weights.bars = ring_bars;
  weights.lm_head = lm_head;
  if (linears) IssueRound(LinearAt(p, weights.at), 0, 0, weights.ring, weights.bars);
  for (int layer = 0; layer < p.num_layers; ++layer) {
    const PersistentDecodeLayer& l = p.layers[layer];
    // 1. q|k|v with rotary; k and v to the cache.
    if (!norms) {
    } else if (layer == 0) {
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
    if (linears) RunLinear(p, weights, smem, unit_sums, qkv_out);
    barrier.Sync();
    // 2. Attention partials.
    if (attention) AttentionPhase(p, l, smem);
    barrier.Sync();
    // 3. x += attn W_o^T.
    if (attention) MergeInto(p, smem);
    if (linears) RunLinear(p, weights, smem, unit_sums, OutTo(p.x));
    barrier.Sync();
    // 4. act = silu(gate) * up of RMSNorm(x).
    if (norms) NormInto(p.x, nullptr, nullptr, l.post_attn_norm, p.hidden, p.eps, smem, scratch);
    if (linears) RunLinear(p, weights, smem, unit_sums, OutTo(p.act));
    barrier.Sync();
    // 5. x += act W_down^T.
    if (norms) StageInto(p.act, p.intermediate, smem);
    if (linears) RunLinear(p, weights, smem, unit_sums, OutTo(p.x));
    barrier.Sync();
  }
  if (!lm_head) return;
  NormInto(p.x, nullptr, nullptr, p.final_norm, p.hidden, p.eps, smem, scratch);
  if (linears) RunLinear(p, weights, smem, unit_sums, OutTo(p.logits));
}

int32_t SharedFloats(const PersistentDecodeParams& p) {
  const int32_t attention = kWarps * (kHeadDim + 2) + kMaxGroup * kHeadDim;
  // MergeInto keeps every (head, split)'s max and sum after the heads' outputs.
  const int32_t merge = p.num_heads * kHeadDim + 2 * p.num_heads * kPersistentDecodeMaxSplits;
  const int32_t widest = std::max({p.hidden, merge, p.intermediate});
  return std::max(attention, widest);
}

// The ring's bytes for `slots` units a linear warp a round (two buffers).
size_t RingBytes(int slots) { return size_t{2} * static_cast<size_t>(slots) * kLinearWarps * 512; }
size_t SharedBytes(const PersistentDecodeParams& p, int slots) {
  return RingBytes(slots) + static_cast<size_t>(SharedFloats(p)) * sizeof(float);
}

int g_ctas = 0;         // one a SM, set by PreparePersistentDecode
int g_round_slots = 0;  // the ring's slots a linear warp, as many as the shared memory holds

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
  if (p.num_heads * kHeadDim > 4096) return no("query width over 4,096");
  if (p.vocab > (1 << 22)) return no("vocab over 4M");  // CTA x groups in 32 bits (Linear::rounds)
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
  // Static shared memory: unit_sums and the reduction scratch (~1 KB).
  const size_t static_bytes = kLinearWarps * kMaxRoundSlots * sizeof(float) + 32 * sizeof(float) + 64;
  int slots = kMaxRoundSlots;
  while (slots > 0 && SharedBytes(shape, slots) + static_bytes > static_cast<size_t>(optin)) --slots;
  // A round must hold a whole group: up to 2 rows of 16 units.
  if (slots < 3) {
    if (why != nullptr) *why = "shared memory too small for the weight ring";
    return false;
  }
  const size_t bytes = SharedBytes(shape, slots);
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
  g_round_slots = slots;
  return true;
}

cudaError_t LaunchPersistentDecode(const PersistentDecodeParams& p, cudaStream_t stream) {
  if (g_ctas == 0 || !ShapeFits(p, nullptr)) return cudaErrorInvalidValue;
  if (p.layers == nullptr || p.embed == nullptr || p.lm_head == nullptr || p.final_norm == nullptr ||
      p.inv_freq == nullptr || p.token_ids == nullptr || p.positions == nullptr || p.slots == nullptr ||
      p.items == nullptr || p.block_tables == nullptr || p.x == nullptr || p.q == nullptr || p.act == nullptr ||
      p.partial == nullptr || p.barrier == nullptr)
    return cudaErrorInvalidValue;
  PersistentDecodeParams q = p;
  q.round_slots = g_round_slots;
  cudaLaunchAttribute cooperative;
  cooperative.id = cudaLaunchAttributeCooperative;
  cooperative.val.cooperative = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(g_ctas));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = SharedBytes(q, g_round_slots);
  config.stream = stream;
  config.attrs = &cooperative;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, PersistentDecodeKernel, q);
}

}  // namespace ernie::cuda
