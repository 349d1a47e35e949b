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

// Inclusive prefix sum over the block in thread order.
__device__ double BlockInclusiveScan(double v, double* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int offset = 1; offset < 32; offset <<= 1) {
    const double up = __shfl_up_sync(kFullMask, v, offset);
    if (lane >= offset) v += up;
  }
  __syncthreads();
  if (lane == 31) scratch[warp] = v;
  __syncthreads();
  double before = 0.0;
  for (int w = 0; w < warp; ++w) before += scratch[w];
  return before + v;
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
    // that hit the same bucket add up first (match + shuffles) and one of
    // them does the atomics. The loop is warp-uniform for the collectives.
    const int lane = threadIdx.x % 32;
    constexpr uint32_t kNoBucket = 0xffffffffu;
    for (int32_t base = 0; base < vocab; base += kThreads) {
      const int32_t i = base + static_cast<int32_t>(threadIdx.x);
      const float w = i < vocab ? weight(i) : 0.0f;
      const uint32_t key = __float_as_uint(w);
      uint32_t bucket = kNoBucket;
      if (w > 0.0f && (level == 0 || (key >> (shift + kBucketBits)) == (prefix >> (shift + kBucketBits))))
        bucket = level == 0 ? min(key >> shift, static_cast<uint32_t>(kBuckets - 1)) : (key >> shift) & (kBuckets - 1);
      const uint32_t peers = __match_any_sync(kFullMask, bucket);
      double group_mass = 0.0;
      for (int src = 0; src < 32; ++src) {  // in lane order: the same sum whichever lane leads
        const double v = __shfl_sync(kFullMask, static_cast<double>(w), src);
        if ((peers >> src) & 1u) group_mass += v;
      }
      if (bucket != kNoBucket && __ffs(peers) - 1 == lane) {
        atomicAdd(&s.hist_count[bucket], static_cast<uint32_t>(__popc(peers)));
        atomicAdd(&s.hist_mass[bucket], group_mass);
      }
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
    // exceeds uniform * kept mass. Each thread owns a contiguous segment.
    const double target = row.uniform * kept.mass;
    const int32_t segment = (vocab + kThreads - 1) / kThreads;
    const int32_t begin = min(vocab, static_cast<int32_t>(threadIdx.x) * segment);
    const int32_t end = min(vocab, begin + segment);
    double own = 0.0;
    int32_t last_kept = -1;
    for (int32_t i = begin; i < end; ++i) {
      const float w = weight(i);
      if (IsKept(kept, __float_as_uint(w), i)) {
        own += w;
        last_kept = i;
      }
    }
    if (threadIdx.x == 0) s.found = -1;
    const double inclusive = BlockInclusiveScan(own, s.sums);
    const double exclusive = inclusive - own;
    if (exclusive <= target && target < inclusive) {
      double cumulative = exclusive;
      int32_t pick = last_kept;  // rounding of the segment sum: its last kept token
      for (int32_t i = begin; i < end; ++i) {
        const float w = weight(i);
        if (!IsKept(kept, __float_as_uint(w), i)) continue;
        cumulative += w;
        if (cumulative > target) {
          pick = i;
          break;
        }
      }
      s.found = pick;
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
