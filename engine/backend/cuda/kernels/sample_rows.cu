// One cluster of CTAs per sample row (see sample_rows.h): each CTA takes a
// contiguous slice of the row through every pass, and what a pass decides
// (a best logit, a sum, a histogram, a boundary) is combined over the
// cluster through distributed shared memory, in rank order, so every CTA
// reaches the same decision. Every pass recomputes a token's weight from its
// logit rather than storing the weights: the row is read from L2 several
// times, but no [rows, vocab] workspace is needed and a pass is a few flops
// per byte.
//
// Why a cluster: one CTA walked a 103,424-token row about seven times (max,
// mass, three radix levels, ties, draw), ~200 iterations a thread each, on
// one SM: a top-p row took ~0.45 ms, about as long as the 0.3b's whole
// greedy decode step at batch 1 (v16).
#include <cooperative_groups.h>

#include <cfloat>
#include <climits>

#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/sample_rows.h"

namespace ernie::cuda {
namespace {

using kernels::kFullMask;

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kBucketBits = 10;  // each radix level: 10 bits of the weight's float bits
constexpr int kBuckets = 1 << kBucketBits;

// engine/sample/fast_exp.h on the device, operation for operation (the host
// build targets x86-64-v3, whose compiler fuses the multiply-adds written
// here as fmaf), so weights come out bit-identical.
__device__ __forceinline__ float FastExpNonPositive(float x) {
  const int32_t bits = __float_as_int(x);
  const int32_t lowest_bits = __float_as_int(-87.0f);
  const bool in_range = bits < lowest_bits || (bits >= 0 && bits < 0x7F800000);
  const uint32_t keep = 0u - static_cast<uint32_t>(in_range);
  x = __uint_as_float((static_cast<uint32_t>(bits) & keep) | (static_cast<uint32_t>(lowest_bits) & ~keep));
  constexpr float kRoundingShift = 12582912.0f;
  const float shifted = fmaf(x, 1.44269504f, kRoundingShift);
  const float n = shifted - kRoundingShift;
  const float r = fmaf(-n, 1.428606765330187e-06f, fmaf(-n, 0.693145751953125f, x));
  float p = 1.0f / 720.0f;
  p = fmaf(p, r, 1.0f / 120.0f);
  p = fmaf(p, r, 1.0f / 24.0f);
  p = fmaf(p, r, 1.0f / 6.0f);
  p = fmaf(p, r, 0.5f);
  p = fmaf(p, r, 1.0f);
  p = fmaf(p, r, 1.0f);
  const uint32_t exponent = __float_as_uint(shifted) - __float_as_uint(kRoundingShift) + 127u;
  const float two_to_n = __uint_as_float(exponent << 23);
  return __uint_as_float(__float_as_uint(__fmul_rn(p, two_to_n)) & keep);
}

// (value, id) in the order value desc, id asc; NaN reads as -inf.
struct Ranked {
  float value;
  int32_t id;
};
__device__ __forceinline__ bool Before(const Ranked& a, const Ranked& b) {
  return a.value > b.value || (a.value == b.value && a.id < b.id);
}
__device__ __forceinline__ float Clean(float v) { return v != v ? -INFINITY : v; }

// Logits a thread requests together in a pass over its tokens. Every pass
// walked its tokens one dependent load at a time: ~200 loads a thread at
// 256 rows (one CTA a row), ~25 at batch 1, each a full L2 or HBM round
// trip, so a top-p row's seven passes cost ~0.9 ms a step at 256 rows and
// ~0.14 ms at 1 (v18). The visit order is unchanged, so every sum keeps its
// bits.
constexpr int kLoadsInFlight = 8;

// f(i, logits[i]) for i = first, first + stride, ... below end, in that
// order, kLoadsInFlight logits requested at a time.
template <typename F>
__device__ __forceinline__ void ForEachLogit(const float* logits, int32_t first, int32_t end, int32_t stride, F f) {
  int32_t i = first;
  for (; i + (kLoadsInFlight - 1) * stride < end; i += kLoadsInFlight * stride) {
    float v[kLoadsInFlight];
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) v[u] = __ldg(logits + i + u * stride);
#pragma unroll
    for (int u = 0; u < kLoadsInFlight; ++u) f(i + u * stride, v[u]);
  }
  for (; i < end; i += stride) f(i, __ldg(logits + i));
}

// The first of every thread's `mine` in the order above; all threads get it.
__device__ Ranked BlockFirst(Ranked mine, Ranked* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const Ranked other{__shfl_xor_sync(kFullMask, mine.value, offset), __shfl_xor_sync(kFullMask, mine.id, offset)};
    if (Before(other, mine)) mine = other;
  }
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = mine;
  __syncthreads();
  mine = scratch[0];
  for (int w = 1; w < kWarps; ++w)
    if (Before(scratch[w], mine)) mine = scratch[w];
  return mine;
}

__device__ double BlockSumDouble(double v, double* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < kWarps; ++w) total += scratch[w];
  return total;
}

__device__ long long BlockSumCount(long long v, long long* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  long long total = 0;
  for (int w = 0; w < kWarps; ++w) total += scratch[w];
  return total;
}

__device__ int BlockMaxInt(int v, int* scratch) {
  for (int offset = 16; offset > 0; offset >>= 1) v = max(v, __shfl_xor_sync(kFullMask, v, offset));
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  int best = scratch[0];
  for (int w = 1; w < kWarps; ++w) best = max(best, scratch[w]);
  return best;
}

// The warp's sum, the same bits in every lane (each xor step adds the same
// two values in either order).
__device__ double WarpSumDouble(double v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// Inclusive prefix sum over the warp in lane order.
__device__ double WarpInclusiveScanDouble(double v) {
  const int lane = threadIdx.x % 32;
  for (int offset = 1; offset < 32; offset <<= 1) {
    const double up = __shfl_up_sync(kFullMask, v, offset);
    if (lane >= offset) v += up;
  }
  return v;
}

// The kept set of TruncatedDistribution: every token with key > min_key,
// plus those with key == min_key and id <= last_tied_id.
struct KeptSet {
  uint32_t min_key;
  int32_t last_tied_id;
  double mass;
  long long count;
};
__device__ __forceinline__ bool IsKept(const KeptSet& k, uint32_t key, int32_t id) {
  return key > k.min_key || (key == k.min_key && id <= k.last_tied_id);
}

struct RowWeights {
  const float* logits;
  float max_logit;
  float inverse_temperature;
  float min_p;
  __device__ __forceinline__ float operator()(int32_t i) const { return Of(i, logits[i]); }
  // The weight of token i whose logit (already loaded) is `logit`.
  __device__ __forceinline__ float Of(int32_t i, float logit) const {
    const float w = FastExpNonPositive(__fmul_rn(__fsub_rn(logit, max_logit), inverse_temperature));
    return w >= min_p ? w : 0.0f;
  }
};

// CTAs a row: up to kMaxRanks (the portable cluster size), fewer when the
// rows alone fill the SMs.
constexpr int kMaxRanks = 8;

struct SharedState {
  uint32_t hist_count[kBuckets];  // this CTA's histogram of a radix level
  double hist_mass[kBuckets];
  uint32_t merged_count[kBuckets];  // the cluster's, summed in rank order
  double merged_mass[kBuckets];
  double lane_weight[kWarps][32];  // SelectPrefix: each warp's current weights, for its bucket leaders
  Ranked ranked[kWarps];
  double sums[kWarps];
  long long counts[kWarps];
  int ints[kWarps];
  // Exchange slots: [rank] of the cluster's CTAs, written by each CTA into every CTA's copy.
  Ranked x_ranked[kMaxRanks];
  double x_sum[kMaxRanks];
  long long x_count[kMaxRanks];
  int x_int[kMaxRanks];
  double x_warp_mass[kMaxRanks * kWarps];  // the draw: every warp's kept mass, in (rank, warp) order
  KeptSet kept;
  long long above_count;  // totals of the tokens strictly above the boundary being refined
  double above_mass;
  uint32_t prefix;
  uint32_t boundary_count;
  int32_t found;
};

namespace cg = cooperative_groups;

// The cluster-wide combination of each CTA's `mine` (the same in all of a
// CTA's threads): every CTA writes it into slot [rank] of every CTA's
// `slots`, then each folds the slots in rank order, so all CTAs get the same
// bits. The slots stay readable until the next exchange through them.
template <typename T, typename Fold>
__device__ T ClusterFold(const cg::cluster_group& cluster, T mine, T* slots, Fold fold) {
  const int ranks = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
  cluster.sync();  // every CTA has read its slots of the previous exchange
  if (static_cast<int>(threadIdx.x) < ranks) cluster.map_shared_rank(slots, static_cast<int>(threadIdx.x))[rank] = mine;
  cluster.sync();
  T acc = slots[0];
  for (int q = 1; q < ranks; ++q) acc = fold(acc, slots[q]);
  return acc;
}

__device__ Ranked ClusterFirst(const cg::cluster_group& cluster, Ranked mine, SharedState& s) {
  return ClusterFold(cluster, BlockFirst(mine, s.ranked), s.x_ranked,
                     [](Ranked a, Ranked b) { return Before(b, a) ? b : a; });
}
__device__ double ClusterSumDouble(const cg::cluster_group& cluster, double v, SharedState& s) {
  return ClusterFold(cluster, BlockSumDouble(v, s.sums), s.x_sum, [](double a, double b) { return a + b; });
}
__device__ long long ClusterSumCount(const cg::cluster_group& cluster, long long v, SharedState& s) {
  return ClusterFold(cluster, BlockSumCount(v, s.counts), s.x_count, [](long long a, long long b) { return a + b; });
}
__device__ int ClusterMaxInt(const cg::cluster_group& cluster, int v, SharedState& s) {
  return ClusterFold(cluster, BlockMaxInt(v, s.ints), s.x_int, [](int a, int b) { return max(a, b); });
}

// This CTA's part of the row: [begin, end), a multiple of 32 tokens long
// (the draw's warps read whole 32-token pieces).
struct Slice {
  int32_t begin, end;
};

// TruncatedDistribution::SelectPrefix: the shortest prefix of the order
// (weight desc, id asc) whose count (by_count) or mass reaches `target`.
__device__ KeptSet SelectPrefix(const cg::cluster_group& cluster, const RowWeights& weight, Slice slice, bool by_count,
                                double target, SharedState& s) {
  const int ranks = static_cast<int>(cluster.num_blocks());
  if (threadIdx.x == 0) {
    s.above_count = 0;
    s.above_mass = 0.0;
    s.prefix = 0;
  }
  for (int level = 0; level < 3; ++level) {
    const int shift = (2 - level) * kBucketBits;
    for (int b = threadIdx.x; b < kBuckets; b += kThreads) {
      s.hist_count[b] = 0;
      s.hist_mass[b] = 0.0;
    }
    __syncthreads();
    const uint32_t prefix = s.prefix;
    // Most weights share a handful of level-0 buckets (their exponent), so
    // one shared atomic per token would serialise on them. Lanes of a warp
    // that hit the same bucket add up first and one of them (the lowest)
    // does the atomics. It adds its peers' weights in lane order from a
    // per-warp copy in shared memory: as many steps as the largest peer
    // group (a few, unless a warp's 32 weights share one bucket), where 32
    // double shuffles per chunk of the row made this loop most of a top-p
    // row's time (v16). The loop is warp-uniform for the collectives; chunks
    // in which no lane has a bucket (levels 1 and 2 keep only the
    // boundary's tokens) are skipped.
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    constexpr uint32_t kNoBucket = 0xffffffffu;
    // kLoadsInFlight chunks' logits are requested before the first is binned.
    for (int32_t group_base = slice.begin; group_base < slice.end; group_base += kLoadsInFlight * kThreads) {
      float logit[kLoadsInFlight];
#pragma unroll
      for (int u = 0; u < kLoadsInFlight; ++u) {
        const int32_t i = group_base + u * kThreads + static_cast<int32_t>(threadIdx.x);
        logit[u] = i < slice.end ? __ldg(weight.logits + i) : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kLoadsInFlight; ++u) {
        const int32_t base = group_base + u * kThreads;  // warp-uniform
        if (base >= slice.end) break;
        const int32_t i = base + static_cast<int32_t>(threadIdx.x);
        const float w = i < slice.end ? weight.Of(i, logit[u]) : 0.0f;
        const uint32_t key = __float_as_uint(w);
        uint32_t bucket = kNoBucket;
        if (w > 0.0f && (level == 0 || (key >> (shift + kBucketBits)) == (prefix >> (shift + kBucketBits))))
          bucket =
              level == 0 ? min(key >> shift, static_cast<uint32_t>(kBuckets - 1)) : (key >> shift) & (kBuckets - 1);
        if (__ballot_sync(kFullMask, bucket != kNoBucket) == 0) continue;
        const uint32_t peers = __match_any_sync(kFullMask, bucket);
        s.lane_weight[warp][lane] = static_cast<double>(w);
        __syncwarp();
        if (bucket != kNoBucket && __ffs(peers) - 1 == lane) {
          double group_mass = 0.0;
          for (uint32_t rest = peers; rest != 0; rest &= rest - 1) group_mass += s.lane_weight[warp][__ffs(rest) - 1];
          atomicAdd(&s.hist_count[bucket], static_cast<uint32_t>(__popc(peers)));
          atomicAdd(&s.hist_mass[bucket], group_mass);
        }
        __syncwarp();  // the leaders have read this chunk's weights before the next overwrites them
      }
    }
    // The cluster's histogram: each bucket summed over the CTAs in rank order.
    cluster.sync();  // every CTA's histogram is complete
    for (int b = threadIdx.x; b < kBuckets; b += kThreads) {
      uint32_t count = 0;
      double mass = 0.0;
      for (int q = 0; q < ranks; ++q) {
        count += cluster.map_shared_rank(s.hist_count, q)[b];
        mass += cluster.map_shared_rank(s.hist_mass, q)[b];
      }
      s.merged_count[b] = count;
      s.merged_mass[b] = mass;
    }
    cluster.sync();  // nobody clears its histogram for the next level while another still reads it
    if (threadIdx.x == 0) {
      // FindBoundaryBucket: from the highest bucket down, the first at which
      // the goal is reached; the lowest non-empty one when it never is.
      int lowest = -1, boundary = -1;
      for (int b = kBuckets - 1; b >= 0; --b) {
        const uint32_t c = s.merged_count[b];
        if (c == 0) continue;
        const double m = s.merged_mass[b];
        const bool reached = by_count ? static_cast<double>(s.above_count + c) >= target : s.above_mass + m >= target;
        if (reached) {
          boundary = b;
          break;
        }
        lowest = b;
        s.above_count += c;
        s.above_mass += m;
      }
      if (boundary < 0) {
        boundary = lowest;
        s.above_count -= s.merged_count[lowest];
        s.above_mass += -s.merged_mass[lowest];
      }
      s.prefix |= static_cast<uint32_t>(boundary) << shift;
      s.boundary_count = s.merged_count[boundary];
    }
    __syncthreads();
  }
  // Ties: every candidate weighs exactly `prefix`'s float; take them in id
  // order until the goal is reached.
  const uint32_t prefix = s.prefix;
  if (threadIdx.x == 0) {
    const float w = __uint_as_float(prefix);
    KeptSet k{prefix, -1, s.above_mass, s.above_count};
    uint32_t taken = 0;
    while (taken < s.boundary_count) {
      ++k.count;
      k.mass += w;
      ++taken;
      if (by_count ? static_cast<double>(k.count) >= target : k.mass >= target) break;
    }
    s.kept = k;
    s.found = static_cast<int32_t>(taken);  // the rank of the last tie kept
  }
  __syncthreads();
  const uint32_t wanted = static_cast<uint32_t>(s.found);
  const uint32_t ties = s.boundary_count;
  __syncthreads();
  int32_t last_id = -1;
  if (wanted == ties) {
    int mine = -1;
    ForEachLogit(weight.logits, slice.begin + static_cast<int32_t>(threadIdx.x), slice.end, kThreads,
                 [&](int32_t i, float logit) {
                   if (__float_as_uint(weight.Of(i, logit)) == prefix) mine = max(mine, i);
                 });
    last_id = ClusterMaxInt(cluster, mine, s);
  } else {
    // The wanted-th tie in id order: this CTA's ties counted, the CTAs
    // before it (rank order is id order) summed, and the CTA that holds it
    // ranks its own by ballots over chunks of its slice.
    long long mine = 0;
    ForEachLogit(weight.logits, slice.begin + static_cast<int32_t>(threadIdx.x), slice.end, kThreads,
                 [&](int32_t i, float logit) { mine += __float_as_uint(weight.Of(i, logit)) == prefix; });
    const long long own = BlockSumCount(mine, s.counts);
    // Every CTA's count stays in s.x_count.
    ClusterFold(cluster, own, s.x_count, [](long long a, long long b) { return a + b; });
    long long before = 0;
    for (int q = 0; q < static_cast<int>(cluster.block_rank()); ++q) before += s.x_count[q];
    int32_t found = -1;
    if (static_cast<long long>(wanted) > before && static_cast<long long>(wanted) <= before + own) {
      const auto local = static_cast<uint32_t>(static_cast<long long>(wanted) - before);
      const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
      uint32_t running = 0;
      if (threadIdx.x == 0) s.found = -1;
      for (int32_t base = slice.begin; base < slice.end; base += kThreads) {
        const int32_t i = base + static_cast<int32_t>(threadIdx.x);
        const bool tie = i < slice.end && __float_as_uint(weight(i)) == prefix;
        const uint32_t ballot = __ballot_sync(kFullMask, tie);
        __syncthreads();
        if (lane == 0) s.ints[warp] = __popc(ballot);
        __syncthreads();
        uint32_t rank_before = running;
        for (int w = 0; w < warp; ++w) rank_before += static_cast<uint32_t>(s.ints[w]);
        const uint32_t rank = rank_before + __popc(ballot & ((1u << lane) - 1u)) + 1u;
        if (tie && rank == local) s.found = i;
        for (int w = 0; w < kWarps; ++w) running += static_cast<uint32_t>(s.ints[w]);
        __syncthreads();
        if (s.found >= 0 || running >= local) break;
      }
      found = s.found;
    }
    last_id = ClusterMaxInt(cluster, found, s);
  }
  KeptSet k = s.kept;
  k.last_tied_id = last_id;
  return k;
}

__global__ void __launch_bounds__(kThreads) SampleRowsKernel(SampleRowsParams p) {
  __shared__ SharedState s;
  const cg::cluster_group cluster = cg::this_cluster();
  const int ranks = static_cast<int>(cluster.num_blocks()), rank = static_cast<int>(cluster.block_rank());
  const int row_index = static_cast<int>(blockIdx.x) / ranks;
  const SampleRowParams row = p.rows[row_index];
  if (row.fast_greedy) return;  // every CTA of the cluster: the greedy kernel's row
  const float* logits = p.logits + static_cast<size_t>(row.logit_row) * static_cast<size_t>(p.vocab);
  const int32_t vocab = p.vocab;
  const int32_t per_rank = (vocab + 32 * ranks - 1) / (32 * ranks) * 32;
  const Slice slice{min(vocab, rank * per_rank), min(vocab, (rank + 1) * per_rank)};
  SampleRowResult* out = p.results + row_index;
  const bool writer = rank == 0 && threadIdx.x == 0;
  const auto first = static_cast<int32_t>(slice.begin + threadIdx.x);

  // Every decision below is the cluster's (ClusterFold), so all its CTAs
  // take the same branches and meet at the same exchanges.
  Ranked mine{-INFINITY, INT_MAX};
  ForEachLogit(logits, first, slice.end, kThreads, [&](int32_t i, float logit) {
    const Ranked r{Clean(logit), i};
    if (Before(r, mine)) mine = r;
  });
  const Ranked best = ClusterFirst(cluster, mine, s);
  if (!isfinite(best.value)) {
    if (writer) out->token = -1;
    return;
  }

  // Raw log-probabilities (Sampler::SampleRow: max + log(sum exp(x - max))).
  float log_normalizer = 0.0f;
  if (row.logprobs || row.top_logprobs > 0) {
    double sum = 0.0;
    ForEachLogit(logits, first, slice.end, kThreads,
                 [&](int32_t, float logit) { sum += FastExpNonPositive(__fsub_rn(logit, best.value)); });
    log_normalizer = __fadd_rn(best.value, static_cast<float>(log(ClusterSumDouble(cluster, sum, s))));
    Ranked previous = best;
    for (int k = 0; k < row.top_logprobs; ++k) {
      if (k > 0) {
        Ranked next{-INFINITY, INT_MAX};
        ForEachLogit(logits, first, slice.end, kThreads, [&](int32_t i, float logit) {
          const Ranked r{Clean(logit), i};
          if (Before(previous, r) && Before(r, next)) next = r;
        });
        previous = ClusterFirst(cluster, next, s);
      }
      if (writer) {
        out->top_ids[k] = previous.id;
        out->top_logprobs[k] = __fsub_rn(previous.value, log_normalizer);
      }
    }
  }

  // The raw pass of a row about to be edited (DeviceSampler): its
  // log-probabilities are all it is for.
  if (row.stats_only) {
    if (writer) {
      out->token = best.id;
      out->log_normalizer = log_normalizer;
    }
    return;
  }

  int32_t token = best.id;
  if (!row.greedy) {
    const RowWeights weight{logits, best.value, row.inverse_temperature, row.min_p};
    double mass = 0.0;
    long long count = 0;
    ForEachLogit(logits, first, slice.end, kThreads, [&](int32_t i, float logit) {
      const float w = weight.Of(i, logit);
      mass += w;
      count += w > 0.0f;
    });
    const double total_mass = ClusterSumDouble(cluster, mass, s);
    KeptSet kept{0, -1, total_mass, ClusterSumCount(cluster, count, s)};
    if (row.top_k > 0 && row.top_k < vocab) kept = SelectPrefix(cluster, weight, slice, true, row.top_k, s);
    if (row.top_p < 1.0f)
      kept = SelectPrefix(cluster, weight, slice, false, static_cast<double>(row.top_p) * kept.mass, s);

    // The draw: the first kept token (id order) whose cumulative weight
    // exceeds uniform * kept mass. Each warp owns a contiguous stretch of its
    // CTA's slice, which its lanes read 32 consecutive tokens at a time (a
    // stretch per thread made every warp load touch 32 cache lines); every
    // warp's sum goes to every CTA, each thread adds those before its own in
    // (rank, warp) order, so one warp's end is exactly the next one's start,
    // and the warp whose stretch holds the target walks it again with a scan
    // per 32 tokens.
    const double target = row.uniform * kept.mass;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int32_t stretch = (per_rank / 32 + kWarps - 1) / kWarps * 32;  // a multiple of 32
    const int32_t begin = min(slice.end, slice.begin + warp * stretch);
    const int32_t end = min(slice.end, begin + stretch);
    double own = 0.0;
    int32_t last_kept = -1;
    ForEachLogit(logits, begin + lane, end, 32, [&](int32_t i, float logit) {
      const float w = weight.Of(i, logit);
      if (IsKept(kept, __float_as_uint(w), i)) {
        own += w;
        last_kept = i;
      }
    });
    own = WarpSumDouble(own);  // every lane holds the warp's sum
    const int32_t warp_last_kept = __reduce_max_sync(kFullMask, last_kept);
    if (threadIdx.x == 0) s.found = -1;
    if (lane == 0) s.sums[warp] = own;
    __syncthreads();
    if (static_cast<int>(threadIdx.x) < kWarps)
      for (int q = 0; q < ranks; ++q)
        cluster.map_shared_rank(s.x_warp_mass, q)[rank * kWarps + threadIdx.x] = s.sums[threadIdx.x];
    cluster.sync();
    double exclusive = 0.0;
    for (int j = 0; j < rank * kWarps + warp; ++j) exclusive += s.x_warp_mass[j];
    if (exclusive <= target && target < exclusive + own) {  // warp-uniform
      double cumulative = exclusive;
      int32_t pick = warp_last_kept;  // rounding of the warp's sum can leave the target past its last token
      for (int32_t chunk = begin; chunk < end; chunk += 32) {
        const int32_t i = chunk + lane;
        const float w = i < end ? weight(i) : 0.0f;
        const double mine_w = i < end && IsKept(kept, __float_as_uint(w), i) ? static_cast<double>(w) : 0.0;
        const double through = cumulative + WarpInclusiveScanDouble(mine_w);
        const uint32_t over = __ballot_sync(kFullMask, mine_w > 0.0 && through > target);
        if (over != 0) {
          pick = chunk + __ffs(over) - 1;
          break;
        }
        cumulative = __shfl_sync(kFullMask, through, 31);
      }
      if (lane == 0) s.found = pick;
    }
    __syncthreads();
    token = ClusterMaxInt(cluster, s.found, s);  // at most one warp of the cluster holds the target
    // Rounding left the target at the very end: the last kept token.
    if (token < 0) token = ClusterMaxInt(cluster, last_kept, s);
  }
  if (writer) {
    out->token = token;
    out->token_logit = Clean(logits[token]);
    out->log_normalizer = log_normalizer;
    out->logprob = row.logprobs ? __fsub_rn(out->token_logit, log_normalizer) : 0.0f;
  }
}

}  // namespace

cudaError_t LaunchSampleRows(const SampleRowsParams& p, cudaStream_t stream) {
  if (p.num_rows == 0) return cudaSuccess;
  if (p.logits == nullptr || p.rows == nullptr || p.results == nullptr || p.num_rows < 0 || p.vocab < 1)
    return cudaErrorInvalidValue;
  // A row's CTAs: a cluster of 8 while rows x 8 CTAs fit about two a SM on
  // an H200; many rows fill the SMs by themselves.
  const int ranks = p.num_rows <= 32 ? kMaxRanks : p.num_rows <= 64 ? 4 : p.num_rows <= 128 ? 2 : 1;
  cudaLaunchAttribute cluster;
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = static_cast<unsigned>(ranks);
  cluster.val.clusterDim.y = 1;
  cluster.val.clusterDim.z = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(p.num_rows * ranks));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = &cluster;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, SampleRowsKernel, p);
}

}  // namespace ernie::cuda
