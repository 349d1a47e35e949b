// One CTA per sample row (see sample_rows.h). Every pass recomputes a
// token's weight from its logit rather than storing the weights: the row is
// read from L2 several times, but no [rows, vocab] workspace is needed and a
// pass is a few flops per byte.
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

__device__ __forceinline__ bool IsBanned(const SampleRowParams& row, int32_t id) {
  for (int j = 0; j < row.num_banned; ++j)
    if (row.banned[j] == id) return true;
  return false;
}

struct RowWeights {
  const float* logits;
  float max_logit;
  float inverse_temperature;
  float min_p;
  const SampleRowParams* row;  // banned ids weigh 0 (their logit is -inf on the host)
  __device__ __forceinline__ float operator()(int32_t i) const {
    if (row->num_banned > 0 && IsBanned(*row, i)) return 0.0f;
    const float w = FastExpNonPositive(__fmul_rn(__fsub_rn(logits[i], max_logit), inverse_temperature));
    return w >= min_p ? w : 0.0f;
  }
};

struct SharedState {
  uint32_t hist_count[kBuckets];
  double hist_mass[kBuckets];
  double lane_weight[kWarps][32];  // SelectPrefix: each warp's current weights, for its bucket leaders
  Ranked ranked[kWarps];
  double sums[kWarps];
  long long counts[kWarps];
  int ints[kWarps];
  KeptSet kept;
  long long above_count;  // totals of the tokens strictly above the boundary being refined
  double above_mass;
  uint32_t prefix;
  uint32_t boundary_count;
  int32_t found;
};

// TruncatedDistribution::SelectPrefix: the shortest prefix of the order
// (weight desc, id asc) whose count (by_count) or mass reaches `target`.
__device__ KeptSet SelectPrefix(const RowWeights& weight, int32_t vocab, bool by_count, double target,
                                SharedState& s) {
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
    // row's time (0.3b at batch 1: a 1.30 ms top-p step against 0.57 ms
    // greedy, v14). The loop is warp-uniform for the collectives; chunks in
    // which no lane has a bucket (levels 1 and 2 keep only the boundary's
    // tokens) are skipped.
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    constexpr uint32_t kNoBucket = 0xffffffffu;
    for (int32_t base = 0; base < vocab; base += kThreads) {
      const int32_t i = base + static_cast<int32_t>(threadIdx.x);
      const float w = i < vocab ? weight(i) : 0.0f;
      const uint32_t key = __float_as_uint(w);
      uint32_t bucket = kNoBucket;
      if (w > 0.0f && (level == 0 || (key >> (shift + kBucketBits)) == (prefix >> (shift + kBucketBits))))
        bucket = level == 0 ? min(key >> shift, static_cast<uint32_t>(kBuckets - 1)) : (key >> shift) & (kBuckets - 1);
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
    __syncthreads();
    if (threadIdx.x == 0) {
      // FindBoundaryBucket: from the highest bucket down, the first at which
      // the goal is reached; the lowest non-empty one when it never is.
      int lowest = -1, boundary = -1;
      for (int b = kBuckets - 1; b >= 0; --b) {
        const uint32_t c = s.hist_count[b];
        if (c == 0) continue;
        const double m = s.hist_mass[b];
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
        s.above_count -= s.hist_count[lowest];
        s.above_mass += -s.hist_mass[lowest];
      }
      s.prefix |= static_cast<uint32_t>(boundary) << shift;
      s.boundary_count = s.hist_count[boundary];
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
    for (int32_t i = threadIdx.x; i < vocab; i += kThreads)
      if (__float_as_uint(weight(i)) == prefix) mine = max(mine, i);
    last_id = BlockMaxInt(mine, s.ints);
  } else {
    // The wanted-th tie in id order: ranks by ballots over chunks of the row.
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    uint32_t running = 0;
    if (threadIdx.x == 0) s.found = -1;
    for (int32_t base = 0; base < vocab; base += kThreads) {
      const int32_t i = base + static_cast<int32_t>(threadIdx.x);
      const bool tie = i < vocab && __float_as_uint(weight(i)) == prefix;
      const uint32_t ballot = __ballot_sync(kFullMask, tie);
      __syncthreads();
      if (lane == 0) s.ints[warp] = __popc(ballot);
      __syncthreads();
      uint32_t before = running;
      for (int w = 0; w < warp; ++w) before += static_cast<uint32_t>(s.ints[w]);
      const uint32_t rank = before + __popc(ballot & ((1u << lane) - 1u)) + 1u;
      if (tie && rank == wanted) s.found = i;
      for (int w = 0; w < kWarps; ++w) running += static_cast<uint32_t>(s.ints[w]);
      __syncthreads();
      if (s.found >= 0 || running >= wanted) break;
    }
    last_id = s.found;
  }
  __syncthreads();
  KeptSet k = s.kept;
  k.last_tied_id = last_id;
  return k;
}

__global__ void __launch_bounds__(kThreads) SampleRowsKernel(SampleRowsParams p) {
  __shared__ SharedState s;
  const SampleRowParams row = p.rows[blockIdx.x];
  const float* logits = p.logits + static_cast<size_t>(row.logit_row) * static_cast<size_t>(p.vocab);
  const int32_t vocab = p.vocab;
  SampleRowResult* out = p.results + blockIdx.x;

  Ranked mine{-INFINITY, INT_MAX};
  for (int32_t i = threadIdx.x; i < vocab; i += kThreads) {
    const Ranked r{Clean(logits[i]), i};
    if (Before(r, mine)) mine = r;
  }
  const Ranked best = BlockFirst(mine, s.ranked);
  if (!isfinite(best.value)) {
    if (threadIdx.x == 0) out->token = -1;
    return;
  }

  // Raw log-probabilities (Sampler::SampleRow: max + log(sum exp(x - max))).
  float log_normalizer = 0.0f;
  if (row.logprobs || row.top_logprobs > 0) {
    double sum = 0.0;
    for (int32_t i = threadIdx.x; i < vocab; i += kThreads)
      sum += FastExpNonPositive(__fsub_rn(logits[i], best.value));
    log_normalizer = __fadd_rn(best.value, static_cast<float>(log(BlockSumDouble(sum, s.sums))));
    Ranked previous = best;
    for (int k = 0; k < row.top_logprobs; ++k) {
      if (k > 0) {
        Ranked next{-INFINITY, INT_MAX};
        for (int32_t i = threadIdx.x; i < vocab; i += kThreads) {
          const Ranked r{Clean(logits[i]), i};
          if (Before(previous, r) && Before(r, next)) next = r;
        }
        previous = BlockFirst(next, s.ranked);
      }
      if (threadIdx.x == 0) {
        out->top_ids[k] = previous.id;
        out->top_logprobs[k] = __fsub_rn(previous.value, log_normalizer);
      }
    }
  }

  // A min_tokens ban: the best of the logits that stay. Banning only lowers
  // values, so the raw best stands unless it is banned itself.
  Ranked chosen = best;
  if (row.num_banned > 0 && IsBanned(row, best.id)) {
    Ranked kept{-INFINITY, INT_MAX};
    for (int32_t i = threadIdx.x; i < vocab; i += kThreads) {
      const Ranked r{IsBanned(row, i) ? -INFINITY : Clean(logits[i]), i};
      if (Before(r, kept)) kept = r;
    }
    chosen = BlockFirst(kept, s.ranked);
    if (!isfinite(chosen.value)) {
      if (threadIdx.x == 0) out->token = -1;
      return;
    }
  }
  int32_t token = chosen.id;
  if (!row.greedy) {
    const RowWeights weight{logits, chosen.value, row.inverse_temperature, row.min_p, &row};
    double mass = 0.0;
    long long count = 0;
    for (int32_t i = threadIdx.x; i < vocab; i += kThreads) {
      const float w = weight(i);
      mass += w;
      count += w > 0.0f;
    }
    KeptSet kept{0, -1, BlockSumDouble(mass, s.sums), BlockSumCount(count, s.counts)};
    if (row.top_k > 0 && row.top_k < vocab) kept = SelectPrefix(weight, vocab, true, row.top_k, s);
    if (row.top_p < 1.0f)
      kept = SelectPrefix(weight, vocab, false, static_cast<double>(row.top_p) * kept.mass, s);

    // The draw: the first kept token (id order) whose cumulative weight
    // exceeds uniform * kept mass. Each warp owns a contiguous stretch of the
    // row, which its lanes read 32 consecutive tokens at a time (a stretch
    // per thread made every warp load touch 32 cache lines); the warps' sums
    // are scanned in order, and the warp whose stretch holds the target walks
    // it again with a scan per 32 tokens.
    const double target = row.uniform * kept.mass;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int32_t stretch = (vocab + kThreads - 1) / kThreads * 32;  // a multiple of 32
    const int32_t begin = min(vocab, warp * stretch);
    const int32_t end = min(vocab, begin + stretch);
    double own = 0.0;
    int32_t last_kept = -1;
    for (int32_t i = begin + lane; i < end; i += 32) {
      const float w = weight(i);
      if (IsKept(kept, __float_as_uint(w), i)) {
        own += w;
        last_kept = i;
      }
    }
    own = WarpSumDouble(own);  // every lane holds the warp's sum
    const int32_t warp_last_kept = __reduce_max_sync(kFullMask, last_kept);
    if (threadIdx.x == 0) s.found = -1;
    if (lane == 0) s.sums[warp] = own;
    __syncthreads();
    // The warps' sums added in warp order by every thread alike, so one
    // warp's end is exactly the next one's start: at most one warp holds
    // the target.
    double exclusive = 0.0;
    for (int w = 0; w < warp; ++w) exclusive += s.sums[w];
    if (exclusive <= target && target < exclusive + own) {  // warp-uniform
      double cumulative = exclusive;
      int32_t pick = warp_last_kept;  // rounding of the warp's sum can leave the target past its last token
      for (int32_t chunk = begin; chunk < end; chunk += 32) {
        const int32_t i = chunk + lane;
        const float w = i < end ? weight(i) : 0.0f;
        const double mine = i < end && IsKept(kept, __float_as_uint(w), i) ? static_cast<double>(w) : 0.0;
        const double through = cumulative + WarpInclusiveScanDouble(mine);
        const uint32_t over = __ballot_sync(kFullMask, mine > 0.0 && through > target);
        if (over != 0) {
          pick = chunk + __ffs(over) - 1;
          break;
        }
        cumulative = __shfl_sync(kFullMask, through, 31);
      }
      if (lane == 0) s.found = pick;
    }
    __syncthreads();
    token = s.found;
    if (token < 0) token = BlockMaxInt(last_kept, s.ints);  // rounding left the target at the very end
  }
  if (threadIdx.x == 0) {
    out->token = token;
    out->logprob = row.logprobs ? __fsub_rn(Clean(logits[token]), log_normalizer) : 0.0f;
  }
}

}  // namespace

cudaError_t LaunchSampleRows(const SampleRowsParams& p, cudaStream_t stream) {
  if (p.num_rows == 0) return cudaSuccess;
  SampleRowsKernel<<<p.num_rows, kThreads, 0, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace ernie::cuda
