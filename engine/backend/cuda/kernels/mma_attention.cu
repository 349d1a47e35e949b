#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/linear_mma.cuh"
#include "engine/backend/cuda/kernels/mma_attention.h"

namespace ernie::cuda {

namespace {

using kernels::PackBf16x2;

constexpr int kWarps = 4;
constexpr int kTileKeys = 64;  // keys one pipeline stage holds
// Tiles in flight while one is used (the kernel's kStages): a decode CTA
// (one token an item, a split of a few tiles) has little to compute per
// tile, so with two stages each tile cost a memory round trip in turn (ncu,
// 0.3b at batch 64: 12 us a layer for ~3 tiles a CTA). Each stage is 34 KB
// at head_dim 128, so more stages mean fewer CTAs an SM: decode grids take
// the stage count (4, 3 or 2) that runs them in the fewest waves, the most
// stages among equals (LaunchShape); prefill CTAs compute more per tile and
// are many: two.
// Block-table entries a CTA copies to shared memory before waiting for the
// kernel before (the tables are uploaded before the step's first kernel), so
// a tile's copies need no dependent global load for their addresses: 512
// blocks, 8,192 keys a split at block size 16; longer splits read the
// table from global memory as they go.
constexpr int kStagedTableEntries = 512;
constexpr int kMergeThreads = 256;
constexpr int kSwapAbMaxGroup = 8;  // query heads a KV head the decode swap-AB kernel takes (its 8 columns)
constexpr float kLog2e = 1.4426950408889634f;

// Shared-memory row of one key: head_dim bf16 plus 16 bytes, so that the
// 8 keys a quad-row of lanes reads (32-bit loads of K, ldmatrix rows of V)
// fall on 8 different 16-byte bank groups.
template <int D>
constexpr int kRowElems = D + 8;

template <int D, int kStages>
constexpr size_t SharedBytes() {
  const size_t tiles = size_t{kStages} * 2 * kTileKeys * kRowElems<D> * 2;
  const size_t merge = size_t{kWarps} * 16 * (D + 2) * 4;  // the key-split shape's per-warp o, m and l
  return std::max(tiles, merge);
}

__device__ __forceinline__ float QuadMax(float v) {
  v = fmaxf(v, __shfl_xor_sync(kernels::kFullMask, v, 1));
  return fmaxf(v, __shfl_xor_sync(kernels::kFullMask, v, 2));
}
__device__ __forceinline__ float QuadSum(float v) {
  v += __shfl_xor_sync(kernels::kFullMask, v, 1);
  return v + __shfl_xor_sync(kernels::kFullMask, v, 2);
}

// Keys of one split: a multiple of the tile, so that few CTAs hold whole
// tiles rather than many holding a handful of keys. The merge recomputes it.
__device__ __forceinline__ int KeysPerSplit(int context, int num_splits) {
  const int even = (context + num_splits - 1) / num_splits;
  return (even + kTileKeys - 1) / kTileKeys * kTileKeys;
}

// Where query row r of an item lives: token and head.
struct RowPlace {
  int64_t token;
  int head;
};
__device__ __forceinline__ RowPlace PlaceOf(const AttentionWorkItem& item, int kv_head, int group, int r) {
  return {item.token_begin + r / group, kv_head * group + r % group};
}

// The running softmax of one query row, in log2 units: m the largest scaled
// score so far, l the sum of 2^(score - m) over this lane's keys (the quad's
// four lanes hold disjoint keys; summed at the end).
struct RowState {
  float m = -INFINITY;
  float l = 0.0f;
};

// The keys of this CTA's split of an item, [begin, end) in tiles of
// kTileKeys, and where their block-table entries are: copied to shared
// memory (`staged`, from first_block on) when they fit kStagedTableEntries,
// else read from `table` as the tiles go.
struct KeySpan {
  int begin, end, num_tiles, first_block;
  bool table_staged;
  const int32_t* table;  // the item's block table
};

// Every thread calls it. An empty span (a split past a short context: the
// merge skips it) returns at once, before any barrier, and the CTA returns;
// otherwise the table is staged and the CTA synchronised.
template <int kThreads = kWarps * 32>
__device__ __forceinline__ KeySpan StageKeySpan(const PagedAttentionParams& p, const AttentionWorkItem& item,
                                                int context, int32_t* staged) {
  KeySpan k;
  k.table = p.block_tables + item.block_table_offset;
  const int per_split = KeysPerSplit(context, p.num_splits);
  k.begin = blockIdx.z * per_split;
  k.end = min(context, k.begin + per_split);
  k.num_tiles = (k.end - k.begin + kTileKeys - 1) / kTileKeys;
  k.first_block = k.begin / p.cache.block_size;
  if (k.begin >= k.end) {
    k.table_staged = false;
    return k;
  }
  const int table_entries = (k.end - 1) / p.cache.block_size - k.first_block + 1;
  k.table_staged = table_entries <= kStagedTableEntries;
  if (k.table_staged)
    for (int i = threadIdx.x; i < table_entries; i += kThreads) staged[i] = k.table[k.first_block + i];
  __syncthreads();
  return k;
}

// Stage the keys and values of tile `tile` of the span (zeros past `end`,
// so that a weight of 0 never meets a NaN of stale memory), with kRange only
// those at positions in [from, to), without committing the copies
// (LoadKvTile does). Without kRange the code is the whole tile's alone (the
// mixed kernel, at its register bound, spilled with the range's compares).
// kThreads: the threads that share the tile's copies, threadIdx.x modulo it
// where the block has more (kBlockThreads: the wide decode kernel's groups of
// four warps each copy their own tile).
template <int D, int kStages, bool kRange = false, int kThreads = kWarps * 32, int kBlockThreads = kThreads>
__device__ __forceinline__ void LoadKvTileKeys(const PagedAttentionParams& p, const KeySpan& k, const int32_t* staged,
                                               int kv_head, __nv_bfloat16* tiles, int tile, int from = 0,
                                               int to = 0) {
  constexpr int kRow = kRowElems<D>;
  __nv_bfloat16* k_s = tiles + (tile % kStages) * 2 * kTileKeys * kRow;
  __nv_bfloat16* v_s = k_s + kTileKeys * kRow;
  const int start = k.begin + tile * kTileKeys;
  // A thread copies the same 16-byte piece of every (kThreads / kPieces)-th
  // key. The key's block and row come from a shift where the block size is a
  // power of two (a uniform branch): an integer division, emulated in ~20
  // instructions, was a third of this loop's (ncu SASS, v19).
  constexpr int kPieces = D / 8;  // 16-byte pieces of a row
  constexpr int kKeysAPass = kThreads / kPieces;
  static_assert(kThreads % kPieces == 0, "every pass covers whole keys");
  // (The one-group kernels' blocks are kThreads wide: no modulo in their code.)
  const int thread = static_cast<int>(kThreads == kBlockThreads ? threadIdx.x : threadIdx.x % kThreads);
  const int piece = thread % kPieces * 8;
  const int block_size = p.cache.block_size;
  const bool power_of_two = (block_size & (block_size - 1)) == 0;
  const int shift = __ffs(block_size) - 1;
  // KvOffset(cache, block, kv_head, row) + piece = block * block_stride +
  // head_piece + row * head_dim, the last two in 32 bits (the backend keeps a
  // block's elements, all heads, below 2^31) and the product one wide multiply: the
  // 64-bit chain KvOffset spells out was ~25 instructions a key (v19 run4).
  const uint32_t head_dim = p.cache.head_dim;
  const uint32_t block_stride = static_cast<uint32_t>(p.cache.num_kv_heads) * block_size * head_dim;
  const uint32_t head_piece = static_cast<uint32_t>(kv_head) * block_size * head_dim + piece;
  const int last = k.end - 1;
  for (int j = thread / kPieces; j < kTileKeys; j += kKeysAPass) {
    const int pos = start + j;
    if (kRange && (pos < from || pos >= to)) continue;
    const bool valid = pos < k.end;
    // Keys past the span read the last one's address (no branch) and are zero-filled.
    const int at = min(pos, last);
    const int b = power_of_two ? at >> shift : at / block_size;
    const uint32_t row = static_cast<uint32_t>(at - b * block_size);
    const auto block = static_cast<uint32_t>(k.table_staged ? staged[b - k.first_block] : k.table[b]);
    const uint64_t off = static_cast<uint64_t>(block) * block_stride + (head_piece + row * head_dim);
    kernels::CpAsync16OrZero(k_s + j * kRow + piece, p.cache.k + off, valid, p.stream_kv);
    kernels::CpAsync16OrZero(v_s + j * kRow + piece, p.cache.v + off, valid, p.stream_kv);
  }
}

// The whole tile, one commit group.
template <int D, int kStages>
__device__ __forceinline__ void LoadKvTile(const PagedAttentionParams& p, const KeySpan& k, const int32_t* staged,
                                           int kv_head, __nv_bfloat16* tiles, int tile) {
  LoadKvTileKeys<D, kStages>(p, k, staged, kv_head, tiles, tile);
  kernels::CpAsyncCommit();
}

// Before tile `tile` is read: the tiles requested after it may stay in
// flight; then the CTA is synchronised (every thread's copies of it landed).
template <int kStages>
__device__ __forceinline__ void WaitForKvTile(int tile, int num_tiles) {
  const int later = min(kStages - 1, num_tiles - 1 - tile);
  if (later >= 3) {
    kernels::CpAsyncWait<3>();
  } else if (later == 2) {
    kernels::CpAsyncWait<2>();
  } else if (later == 1) {
    kernels::CpAsyncWait<1>();
  } else {
    kernels::CpAsyncWait<0>();
  }
  __syncthreads();
}

// The head of both kernels' tile loop: tile + kStages - 1 requested into
// the stage the last iteration freed (its closing barrier), then tile
// waited for; returns the tile's K rows (its V rows follow them).
template <int D, int kStages>
__device__ __forceinline__ const __nv_bfloat16* NextKvTile(const PagedAttentionParams& p, const KeySpan& k,
                                                           const int32_t* staged, int kv_head,
                                                           __nv_bfloat16* tiles, int tile) {
  if (tile + kStages - 1 < k.num_tiles) LoadKvTile<D, kStages>(p, k, staged, kv_head, tiles, tile + kStages - 1);
  WaitForKvTile<kStages>(tile, k.num_tiles);
  return tiles + (tile % kStages) * 2 * kTileKeys * kRowElems<D>;
}

// Which of a CTA's first keys are requested before its programmatic wait.
enum class EarlyKeys {
  kNone,        // none: the mixed kernel (its union of two bodies sits at its bound of 168
                // registers)
  kWholeTiles,  // the tiles that lie wholly before the sequence's first new key
  kSplitTile,   // those and the earlier keys of the tile that holds it (the decode kernel)
};

// The pipeline's first kStages - 1 tiles, with the programmatic wait among
// them: keys before `first_new` (AttentionWorkItem::first_new_position, the
// sequence's first position computed in this step) are of earlier steps, so
// their copies may be issued before WaitForPrerequisiteGrids and stream in
// while the kernel before finishes (kEarly picks which); the rest (at decode
// with kSplitTile, one key: the token's own) after it, in the same commit
// groups. The kernel before
// writes only this step's tokens' K and V: a prefix-cache hit is a block
// committed after its step's samples were read, a fork's tail copy is a
// kernel that lets no dependent start early, and a step's first kernel
// follows its host-staged inputs' copies.
template <int D, int kStages, EarlyKeys kEarly>
__device__ __forceinline__ void LoadFirstKvTilesAroundWait(const PagedAttentionParams& p, const KeySpan& k,
                                                           const int32_t* staged, int kv_head,
                                                           __nv_bfloat16* tiles, int first_new) {
  const int tiles_first = min(kStages - 1, k.num_tiles);
  int t = 0;
  if constexpr (kEarly != EarlyKeys::kNone) {
    for (; t < tiles_first && min(k.end, k.begin + (t + 1) * kTileKeys) <= first_new; ++t)
      LoadKvTile<D, kStages>(p, k, staged, kv_head, tiles, t);
  }
  constexpr bool kSplit = kEarly == EarlyKeys::kSplitTile;
  if (kSplit && t < tiles_first) LoadKvTileKeys<D, kStages, true>(p, k, staged, kv_head, tiles, t, INT_MIN, first_new);
  kernels::WaitForPrerequisiteGrids();  // q and this step's keys come from the kernel before
  if (kSplit && t < tiles_first) {
    LoadKvTileKeys<D, kStages, true>(p, k, staged, kv_head, tiles, t, first_new, INT_MAX);
    kernels::CpAsyncCommit();
    ++t;
  }
  for (; t < tiles_first; ++t) LoadKvTile<D, kStages>(p, k, staged, kv_head, tiles, t);
}

// The decode kernels' end: kWarps partial softmaxes of the same `rows`
// query rows (warp w's at red_o[w][r][D], red_ml[w][r][max, sum], kRowsPerWarp
// rows a warp) merged per (row, dim), then stored as the split's partials or
// as the bf16 output. The caller synchronised after staging them.
template <int D, int kRowsPerWarp, int kCtaWarps = kWarps>
__device__ __forceinline__ void MergeWarpsAndStore(const PagedAttentionParams& p, const AttentionWorkItem& item,
                                                   int kv_head, int group, int rows, const float* red_o,
                                                   const float* red_ml) {
  // A row's warp weights 2^(m_w - M) (over 1/l unless this CTA writes a
  // split's partials) and where its output goes, once a row: computed per
  // (row, dim) element with a division, they were a fifth of a decode CTA's
  // instructions (ncu SASS, v19).
  __shared__ float weight[kRowsPerWarp][kCtaWarps];
  __shared__ int64_t out_at[kRowsPerWarp];  // the row's first element in partial_out or out
  const int64_t cta = (int64_t{blockIdx.x} * p.num_kv_heads + kv_head) * p.num_splits + blockIdx.z;
  const bool partial = p.num_splits > 1;
  if (threadIdx.x < rows) {
    const int r = threadIdx.x;
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < kCtaWarps; ++w) m = fmaxf(m, red_ml[(w * kRowsPerWarp + r) * 2]);
    const float base = m == -INFINITY ? 0.0f : m;
    float l = 0.0f, wr[kCtaWarps];
#pragma unroll
    for (int w = 0; w < kCtaWarps; ++w) {
      wr[w] = exp2f(red_ml[(w * kRowsPerWarp + r) * 2] - base);
      l += wr[w] * red_ml[(w * kRowsPerWarp + r) * 2 + 1];
    }
    const float scale = partial ? 1.0f : 1.0f / l;
#pragma unroll
    for (int w = 0; w < kCtaWarps; ++w) weight[r][w] = wr[w] * scale;
    if (partial) {
      out_at[r] = (cta * kMmaAttentionRows + r) * D;
      p.partial_ml[(cta * kMmaAttentionRows + r) * 2] = m;
      p.partial_ml[(cta * kMmaAttentionRows + r) * 2 + 1] = l;
    } else {
      const RowPlace at = PlaceOf(item, kv_head, group, r);
      out_at[r] = (at.token * p.num_heads + at.head) * D;
    }
  }
  __syncthreads();
  constexpr int kQuads = D / 4;
  for (int idx = threadIdx.x; idx < rows * kQuads; idx += kCtaWarps * 32) {
    const int r = idx / kQuads, d = 4 * (idx % kQuads);
    float4 value = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < kCtaWarps; ++w) {
      const float4 o = *reinterpret_cast<const float4*>(red_o + (w * kRowsPerWarp + r) * D + d);
      const float wt = weight[r][w];
      value.x += wt * o.x, value.y += wt * o.y, value.z += wt * o.z, value.w += wt * o.w;
    }
    if (partial) {
      *reinterpret_cast<float4*>(p.partial_out + out_at[r] + d) = value;
    } else {
      const __nv_bfloat162 lo = __floats2bfloat162_rn(value.x, value.y), hi = __floats2bfloat162_rn(value.z, value.w);
      *reinterpret_cast<uint2*>(p.out + out_at[r] + d) =
          make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
    }
  }
}

// Grid (num_items, num_kv_heads, num_splits), kWarps warps. Fragment layouts
// as in linear_mma.cuh: for lane 4g + c, the warp's query rows g and g + 8
// are its "lo" and "hi" rows. kSplitKeys: the item's (at most 16) rows are
// every warp's rows, and warp w takes keys 16w .. 16w+15 of each tile;
// otherwise warp w takes rows 16w .. 16w+15 and every key of each tile.
template <int D, bool kSplitKeys, int kStages, EarlyKeys kEarly>
__device__ __forceinline__ void MmaAttentionBody(const PagedAttentionParams& p) {
  static_assert(kStages >= 2 && kStages <= 4, "CpAsyncWait below takes up to 3 later tiles");
  constexpr int kRow = kRowElems<D>;
  constexpr int kKSteps = D / 16;   // mma k-steps of the scores, over head_dim
  constexpr int kDimTiles = D / 8;  // 8-wide output tiles
  constexpr int kWarpKeys = kSplitKeys ? kTileKeys / kWarps : kTileKeys;
  constexpr int kKeyTiles = kWarpKeys / 8;  // 8-wide score tiles
  extern __shared__ __align__(16) unsigned char shared_raw[];
  auto* tiles = reinterpret_cast<__nv_bfloat16*>(shared_raw);  // [stage][K, V][kTileKeys][kRow]
  __shared__ int32_t staged_table[kStagedTableEntries];        // blocks first_block ..

  kernels::AllowDependentLaunch();
  const AttentionWorkItem item = p.items[blockIdx.x];
  const int kv_head = blockIdx.y;
  const int group = p.num_heads / p.num_kv_heads;
  const int rows = item.num_tokens * group;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int row_lo = (kSplitKeys ? 0 : 16 * warp) + g, row_hi = row_lo + 8;

  const int context = p.positions[item.token_begin + item.num_tokens - 1] + 1;
  const KeySpan span = StageKeySpan(p, item, context, staged_table);
  if (span.begin >= span.end) return;  // a split past a short context: the merge skips it
  const int begin = span.begin, end = span.end, num_tiles = span.num_tiles;
  // Launched as a programmatic dependent (Launch below): the step's items,
  // positions and block tables are host-staged before the step, so only q
  // and this step's keys (the kernel before writes them) wait for that kernel.
  LoadFirstKvTilesAroundWait<D, kStages, kEarly>(p, span, staged_table, kv_head, tiles, item.first_new_position);

  // The warp's query rows as A fragments (bf16), straight from the float32 q.
  uint32_t qa[kKSteps][4];
  int pos_lo = -1, pos_hi = -1;  // -1: no such row; it sees no key
  {
    const float* q_lo = nullptr;
    const float* q_hi = nullptr;
    if (row_lo < rows) {
      const RowPlace at = PlaceOf(item, kv_head, group, row_lo);
      q_lo = p.q + at.token * p.q_row_stride + int64_t{at.head} * D;
      pos_lo = p.positions[at.token];
    }
    if (row_hi < rows) {
      const RowPlace at = PlaceOf(item, kv_head, group, row_hi);
      q_hi = p.q + at.token * p.q_row_stride + int64_t{at.head} * D;
      pos_hi = p.positions[at.token];
    }
    auto pair = [](const float* q, int d) {
      if (q == nullptr) return 0u;
      const float2 v = *reinterpret_cast<const float2*>(q + d);
      return PackBf16x2(v.x, v.y);
    };
#pragma unroll
    for (int s = 0; s < kKSteps; ++s) {
      qa[s][0] = pair(q_lo, 16 * s + 2 * c);
      qa[s][1] = pair(q_hi, 16 * s + 2 * c);
      qa[s][2] = pair(q_lo, 16 * s + 2 * c + 8);
      qa[s][3] = pair(q_hi, 16 * s + 2 * c + 8);
    }
  }

  float o[kDimTiles][4];
#pragma unroll
  for (int t = 0; t < kDimTiles; ++t) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.0f;
  RowState lo, hi;
  const float scale = p.scale * kLog2e;
  const int warp_key0 = kSplitKeys ? warp * kWarpKeys : 0;  // the warp's first key within a tile

  for (int tile = 0; tile < num_tiles; ++tile) {
    const __nv_bfloat16* k_s = NextKvTile<D, kStages>(p, span, staged_table, kv_head, tiles, tile);
    const __nv_bfloat16* v_s = k_s + kTileKeys * kRow;
    const int key0 = begin + tile * kTileKeys + warp_key0;  // position of the warp's first key

    // Scores: s[t] holds rows lo / hi x keys key0 + 8t + 2c, + 1.
    float s[kKeyTiles][4];
#pragma unroll
    for (int t = 0; t < kKeyTiles; ++t) s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) {
#pragma unroll
      for (int t = 0; t < kKeyTiles; ++t) {
        const __nv_bfloat16* key = k_s + (warp_key0 + 8 * t + g) * kRow + 16 * ks + 2 * c;
        kernels::MmaBf16(s[t], qa[ks], *reinterpret_cast<const uint32_t*>(key),
                         *reinterpret_cast<const uint32_t*>(key + 8));
      }
    }

    // Causal mask, scale to log2 units, online softmax.
    float max_lo = -INFINITY, max_hi = -INFINITY;
#pragma unroll
    for (int t = 0; t < kKeyTiles; ++t) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int pos = key0 + 8 * t + 2 * c + e;
        s[t][e] = pos < end && pos <= pos_lo ? s[t][e] * scale : -INFINITY;
        s[t][2 + e] = pos < end && pos <= pos_hi ? s[t][2 + e] * scale : -INFINITY;
        max_lo = fmaxf(max_lo, s[t][e]);
        max_hi = fmaxf(max_hi, s[t][2 + e]);
      }
    }
    const float m_lo = fmaxf(lo.m, QuadMax(max_lo)), m_hi = fmaxf(hi.m, QuadMax(max_hi));
    // A row that has seen no key yet keeps m = -inf; 0 as the base keeps
    // every exponent below a NaN (2^-inf = 0).
    const float base_lo = m_lo == -INFINITY ? 0.0f : m_lo, base_hi = m_hi == -INFINITY ? 0.0f : m_hi;
    const float corr_lo = exp2f(lo.m - base_lo), corr_hi = exp2f(hi.m - base_hi);
    float sum_lo = 0.0f, sum_hi = 0.0f;
#pragma unroll
    for (int t = 0; t < kKeyTiles; ++t) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        s[t][e] = exp2f(s[t][e] - base_lo);
        s[t][2 + e] = exp2f(s[t][2 + e] - base_hi);
        sum_lo += s[t][e];
        sum_hi += s[t][2 + e];
      }
    }
    lo = {m_lo, lo.l * corr_lo + sum_lo};
    hi = {m_hi, hi.l * corr_hi + sum_hi};
#pragma unroll
    for (int t = 0; t < kDimTiles; ++t) {
      o[t][0] *= corr_lo;
      o[t][1] *= corr_lo;
      o[t][2] *= corr_hi;
      o[t][3] *= corr_hi;
    }

    // o += P V: two score tiles (16 keys) are one A fragment; V's B
    // fragments come transposed from shared memory, two dim tiles a load.
#pragma unroll
    for (int kk = 0; kk < kWarpKeys / 16; ++kk) {
      const uint32_t pa[4] = {PackBf16x2(s[2 * kk][0], s[2 * kk][1]), PackBf16x2(s[2 * kk][2], s[2 * kk][3]),
                              PackBf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              PackBf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      const int matrix = lane / 8, r = lane % 8;
      const __nv_bfloat16* v_row = v_s + (warp_key0 + 16 * kk + r + 8 * (matrix % 2)) * kRow + 8 * (matrix / 2);
#pragma unroll
      for (int t = 0; t < kDimTiles; t += 2) {
        uint32_t b[4];
        kernels::LdMatrixX4Trans(b, v_row + 8 * t);
        kernels::MmaBf16(o[t], pa, b[0], b[1]);
        kernels::MmaBf16(o[t + 1], pa, b[2], b[3]);
      }
    }
    __syncthreads();  // the next iteration's copy overwrites this stage
  }
  lo.l = QuadSum(lo.l);
  hi.l = QuadSum(hi.l);

  const int64_t cta = (int64_t{blockIdx.x} * p.num_kv_heads + kv_head) * p.num_splits + blockIdx.z;
  const bool partial = p.num_splits > 1;
  if constexpr (kSplitKeys) {
    // Four partial softmaxes of the same rows: staged, then merged per (row, dim).
    float* red_o = reinterpret_cast<float*>(shared_raw);  // [kWarps][16][D]
    float* red_ml = red_o + kWarps * 16 * D;              // [kWarps][16][2]
#pragma unroll
    for (int t = 0; t < kDimTiles; ++t) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        red_o[(warp * 16 + g) * D + 8 * t + 2 * c + e] = o[t][e];
        red_o[(warp * 16 + g + 8) * D + 8 * t + 2 * c + e] = o[t][2 + e];
      }
    }
    if (c == 0) {
      red_ml[(warp * 16 + g) * 2] = lo.m;
      red_ml[(warp * 16 + g) * 2 + 1] = lo.l;
      red_ml[(warp * 16 + g + 8) * 2] = hi.m;
      red_ml[(warp * 16 + g + 8) * 2 + 1] = hi.l;
    }
    __syncthreads();
    MergeWarpsAndStore<D, 16>(p, item, kv_head, group, rows, red_o, red_ml);
  } else {
    auto store_row = [&](int r, const RowState& st, int half) {
      if (r >= rows) return;
      if (partial) {
        float* out = p.partial_out + (cta * kMmaAttentionRows + r) * D;
#pragma unroll
        for (int t = 0; t < kDimTiles; ++t)
          *reinterpret_cast<float2*>(out + 8 * t + 2 * c) = make_float2(o[t][2 * half], o[t][2 * half + 1]);
        if (c == 0) {
          p.partial_ml[(cta * kMmaAttentionRows + r) * 2] = st.m;
          p.partial_ml[(cta * kMmaAttentionRows + r) * 2 + 1] = st.l;
        }
        return;
      }
      const RowPlace at = PlaceOf(item, kv_head, group, r);
      __nv_bfloat16* out = p.out + (at.token * p.num_heads + at.head) * D;
      const float inv_l = 1.0f / st.l;
#pragma unroll
      for (int t = 0; t < kDimTiles; ++t)
        *reinterpret_cast<__nv_bfloat162*>(out + 8 * t + 2 * c) =
            __floats2bfloat162_rn(o[t][2 * half] * inv_l, o[t][2 * half + 1] * inv_l);
    };
    store_row(row_lo, lo, 0);
    store_row(row_hi, hi, 1);
  }
}

// An 8x8 bf16 matrix held as mma fragments (lane 4g + c: row g, columns
// 2c and 2c + 1) transposed in registers.
__device__ __forceinline__ uint32_t MovMatrixTrans(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
  return y;
}

// Decode steps (single-token items) of at most 8 query heads a KV head, with
// the queries as the mma's 8-wide side ("swap AB"): S^T = K Q^T and
// O^T = V^T P^T. The general kernel puts 16 query rows on the 16-wide side,
// where a decode item has only its group's 8 (0.3b) or 5 (21B-A3B), so half
// its mma work and its output accumulators were padding; here a warp's 16
// keys of a tile are the 16-wide side of the scores and its 16-dim slices
// of head_dim that of the output. Grid (num_items, num_kv_heads,
// num_splits), kWarps warps; warp w takes keys 16w .. 16w + 15 of each
// 64-key tile, as the general kernel's decode shape does, and the four
// partial softmaxes are merged at the end. For lane 4g + c:
//   Q^T (B fragments, from float32 q): query g, dims 2c, 2c+1 (+8);
//   S^T (D fragment): keys g and g + 8, queries 2c and 2c + 1;
//   P^T (B fragment): query g, keys 2c, 2c+1 (+8), moved there from S^T's
//     layout by movmatrix;
//   O^T (D fragments, one per 16 dims): dims g and g + 8, queries 2c, 2c+1.
// K's A fragments come from shared memory by ldmatrix, V^T's by
// ldmatrix.trans (V is stored [key][dim]). Same split, partial and output
// layout as MmaAttentionKernel, so the merge kernel serves both.
// Q^T of a decode item's group as the swap-AB kernels' B fragments (bf16),
// straight from the float32 q; queries past the group are zeros (their
// scores are finite, their outputs never stored).
template <int D>
__device__ __forceinline__ void LoadSwapAbQueries(const PagedAttentionParams& p, const AttentionWorkItem& item,
                                                  int kv_head, int group, uint32_t (&qb)[D / 16][2]) {
  const int g = threadIdx.x % 32 / 4, c = threadIdx.x % 4;
  const float* q = g < group ? p.q + item.token_begin * p.q_row_stride + int64_t{kv_head * group + g} * D : nullptr;
  auto pair = [&](int d) {
    if (q == nullptr) return 0u;
    const float2 v = *reinterpret_cast<const float2*>(q + d);
    return PackBf16x2(v.x, v.y);
  };
#pragma unroll
  for (int s = 0; s < D / 16; ++s) {
    qb[s][0] = pair(16 * s + 2 * c);
    qb[s][1] = pair(16 * s + 2 * c + 8);
  }
}

// A swap-AB warp's running state: O^T (D fragments, one per 16 dims: dims g
// and g + 8, queries 2c, 2c+1) and the running softmax of queries 2c and
// 2c + 1 (log2 units): m is the warp's (every lane of a column agrees), l
// this lane's two keys' share.
template <int D>
struct SwapAbState {
  float o[D / 16][4];
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};
  __device__ SwapAbState() {
#pragma unroll
    for (int t = 0; t < D / 16; ++t) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.0f;
  }
};

// One warp's 16 keys of one staged 64-key tile (k_s: its K rows, the V rows
// after them; warp_key0: the warp's first key row in the tile, key0 its
// position) into st: S^T = K Q^T, the causal mask, the online softmax and
// O^T += V^T P^T. `scale` is in log2 units.
template <int D>
__device__ __forceinline__ void SwapAbDecodeTile(const __nv_bfloat16* k_s, int warp_key0, int key0, int end, int pos_q,
                                                 float scale, const uint32_t (&qb)[D / 16][2], SwapAbState<D>& st) {
  constexpr int kRow = kRowElems<D>;
  constexpr int kKSteps = D / 16;    // mma k-steps of the scores, over head_dim
  constexpr int kDimTiles = D / 16;  // 16-dim tiles of the output
  const int lane = threadIdx.x % 32, g = lane / 4;
  // ldmatrix: lane l gives row l % 8 of matrix l / 8.
  const int matrix = lane / 8, matrix_row = lane % 8;
  const __nv_bfloat16* v_s = k_s + kTileKeys * kRow;
  // S^T = K Q^T: K's A fragments by ldmatrix, matrix i = keys +8 (i % 2), dims +8 (i / 2).
  // Even and odd k-steps into two sums: two chains of dependent mmas half
  // as long (a four-warp CTA's warps are one a scheduler, so the chain's
  // latency is the tile's).
  float s[4] = {0.0f, 0.0f, 0.0f, 0.0f}, s_odd[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const __nv_bfloat16* k_row = k_s + (warp_key0 + matrix_row + 8 * (matrix % 2)) * kRow + 8 * (matrix / 2);
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks) {
    uint32_t a[4];
    kernels::LdMatrixX4(a, k_row + 16 * ks);
    kernels::MmaBf16(ks % 2 == 0 ? s : s_odd, a, qb[ks][0], qb[ks][1]);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) s[i] += s_odd[i];
  // Causal mask (every query of a decode item is at pos_q), scale, online softmax.
  const int pos_lo = key0 + g, pos_hi = key0 + g + 8;
  const bool see_lo = pos_lo < end && pos_lo <= pos_q, see_hi = pos_hi < end && pos_hi <= pos_q;
  s[0] = see_lo ? s[0] * scale : -INFINITY;
  s[1] = see_lo ? s[1] * scale : -INFINITY;
  s[2] = see_hi ? s[2] * scale : -INFINITY;
  s[3] = see_hi ? s[3] * scale : -INFINITY;
  float max0 = fmaxf(s[0], s[2]), max1 = fmaxf(s[1], s[3]);
#pragma unroll
  for (int offset = 4; offset < 32; offset <<= 1) {  // over the 8 lanes of a column (g)
    max0 = fmaxf(max0, __shfl_xor_sync(kernels::kFullMask, max0, offset));
    max1 = fmaxf(max1, __shfl_xor_sync(kernels::kFullMask, max1, offset));
  }
  const float m0 = fmaxf(st.m[0], max0), m1 = fmaxf(st.m[1], max1);
  // A column that has seen no key yet keeps m = -inf; 0 as the base keeps
  // every exponent below a NaN (2^-inf = 0).
  const float base0 = m0 == -INFINITY ? 0.0f : m0, base1 = m1 == -INFINITY ? 0.0f : m1;
  const float corr0 = exp2f(st.m[0] - base0), corr1 = exp2f(st.m[1] - base1);
  const float p0 = exp2f(s[0] - base0), p1 = exp2f(s[1] - base1);
  const float p2 = exp2f(s[2] - base0), p3 = exp2f(s[3] - base1);
  st.l[0] = st.l[0] * corr0 + p0 + p2;
  st.l[1] = st.l[1] * corr1 + p1 + p3;
  st.m[0] = m0;
  st.m[1] = m1;
#pragma unroll
  for (int t = 0; t < kDimTiles; ++t) {
    st.o[t][0] *= corr0;
    st.o[t][1] *= corr1;
    st.o[t][2] *= corr0;
    st.o[t][3] *= corr1;
  }
  // P^T's B fragments: (key g: queries 2c, 2c+1) transposed to (query g: keys 2c, 2c+1).
  const uint32_t pb0 = MovMatrixTrans(PackBf16x2(p0, p1));  // keys 0 - 7 of the warp's 16
  const uint32_t pb1 = MovMatrixTrans(PackBf16x2(p2, p3));  // keys 8 - 15
  // O^T += V^T P^T: V^T's A fragments by ldmatrix.trans, matrix i = keys +8 (i / 2), dims +8 (i % 2).
  const __nv_bfloat16* v_row = v_s + (warp_key0 + matrix_row + 8 * (matrix / 2)) * kRow + 8 * (matrix % 2);
#pragma unroll
  for (int t = 0; t < kDimTiles; ++t) {
    uint32_t a[4];
    kernels::LdMatrixX4Trans(a, v_row + 16 * t);
    kernels::MmaBf16(st.o[t], a, pb0, pb1);
  }
}

// The swap-AB kernels' end: each warp's sums over its keys, its partial
// softmax staged in shared memory (over the tiles: the caller synchronised
// after reading them), and kCtaWarps partials merged and stored
// (MergeWarpsAndStore).
template <int D, int kCtaWarps>
__device__ __forceinline__ void MergeSwapAbWarpsAndStore(const PagedAttentionParams& p, const AttentionWorkItem& item,
                                                         int kv_head, int group, SwapAbState<D>& st,
                                                         unsigned char* shared_raw) {
  constexpr int kDimTiles = D / 16;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
#pragma unroll
  for (int offset = 4; offset < 32; offset <<= 1) {  // the warp's sums over its 16 keys a tile
    st.l[0] += __shfl_xor_sync(kernels::kFullMask, st.l[0], offset);
    st.l[1] += __shfl_xor_sync(kernels::kFullMask, st.l[1], offset);
  }
  float* red_o = reinterpret_cast<float*>(shared_raw);  // [kCtaWarps][8][D]
  float* red_ml = red_o + kCtaWarps * 8 * D;            // [kCtaWarps][8][2]
#pragma unroll
  for (int t = 0; t < kDimTiles; ++t) {
    red_o[(warp * 8 + 2 * c) * D + 16 * t + g] = st.o[t][0];
    red_o[(warp * 8 + 2 * c + 1) * D + 16 * t + g] = st.o[t][1];
    red_o[(warp * 8 + 2 * c) * D + 16 * t + g + 8] = st.o[t][2];
    red_o[(warp * 8 + 2 * c + 1) * D + 16 * t + g + 8] = st.o[t][3];
  }
  if (g == 0) {
    red_ml[(warp * 8 + 2 * c) * 2] = st.m[0];
    red_ml[(warp * 8 + 2 * c) * 2 + 1] = st.l[0];
    red_ml[(warp * 8 + 2 * c + 1) * 2] = st.m[1];
    red_ml[(warp * 8 + 2 * c + 1) * 2 + 1] = st.l[1];
  }
  __syncthreads();
  MergeWarpsAndStore<D, 8, kCtaWarps>(p, item, kv_head, group, group, red_o, red_ml);
}

// Decode steps (single-token items) of at most 8 query heads a KV head, with
// the queries as the mma's 8-wide side ("swap AB"): S^T = K Q^T and
// O^T = V^T P^T. The general kernel puts 16 query rows on the 16-wide side,
// where a decode item has only its group's 8 (0.3b) or 5 (21B-A3B), so half
// its mma work and its output accumulators were padding; here a warp's 16
// keys of a tile are the 16-wide side of the scores and its 16-dim slices
// of head_dim that of the output. Grid (num_items, num_kv_heads,
// num_splits), kWarps warps; warp w takes keys 16w .. 16w + 15 of each
// 64-key tile, as the general kernel's decode shape does, and the four
// partial softmaxes are merged at the end. For lane 4g + c:
//   Q^T (B fragments, from float32 q): query g, dims 2c, 2c+1 (+8);
//   S^T (D fragment): keys g and g + 8, queries 2c and 2c + 1;
//   P^T (B fragment): query g, keys 2c, 2c+1 (+8), moved there from S^T's
//     layout by movmatrix;
//   O^T (D fragments, one per 16 dims): dims g and g + 8, queries 2c, 2c+1.
// K's A fragments come from shared memory by ldmatrix, V^T's by
// ldmatrix.trans (V is stored [key][dim]). Same split, partial and output
// layout as MmaAttentionKernel, so the merge kernel serves both.
template <int D, int kStages, EarlyKeys kEarly>
__device__ __forceinline__ void MmaDecodeAttentionBody(const PagedAttentionParams& p) {
  static_assert(kStages >= 2 && kStages <= 4, "CpAsyncWait below takes up to 3 later tiles");
  static_assert(kTileKeys / kWarps == 16, "a warp's keys are one 16-wide side of the mma");
  extern __shared__ __align__(16) unsigned char shared_raw[];
  auto* tiles = reinterpret_cast<__nv_bfloat16*>(shared_raw);  // [stage][K, V][kTileKeys][kRow]
  __shared__ int32_t staged_table[kStagedTableEntries];        // blocks first_block ..

  kernels::AllowDependentLaunch();
  const AttentionWorkItem item = p.items[blockIdx.x];  // one token (the launcher checks)
  const int kv_head = blockIdx.y;
  const int group = p.num_heads / p.num_kv_heads;  // <= 8 (the launcher checks)
  const int warp = threadIdx.x / 32;

  const int pos_q = p.positions[item.token_begin];
  const KeySpan span = StageKeySpan(p, item, pos_q + 1, staged_table);
  if (span.begin >= span.end) return;  // a split past a short context: the merge skips it
  const int begin = span.begin, end = span.end, num_tiles = span.num_tiles;
  LoadFirstKvTilesAroundWait<D, kStages, kEarly>(p, span, staged_table, kv_head, tiles, item.first_new_position);

  uint32_t qb[D / 16][2];
  LoadSwapAbQueries<D>(p, item, kv_head, group, qb);
  SwapAbState<D> st;
  const float scale = p.scale * kLog2e;
  const int warp_key0 = warp * 16;
  for (int tile = 0; tile < num_tiles; ++tile) {
    const __nv_bfloat16* k_s = NextKvTile<D, kStages>(p, span, staged_table, kv_head, tiles, tile);
    SwapAbDecodeTile<D>(k_s, warp_key0, begin + tile * kTileKeys + warp_key0, end, pos_q, scale, qb, st);
    __syncthreads();  // the next iteration's copy overwrites this stage
  }
  // The four warps' partial softmaxes of the same queries, merged per
  // (query, dim) as MmaAttentionKernel's decode shape does.
  MergeSwapAbWarpsAndStore<D, kWarps>(p, item, kv_head, group, st, shared_raw);
}

// The swap-AB decode body for short contexts without split-KV
// (PagedAttentionParams::wide_decode): kWideTiles groups of four warps, each
// group copying and reading its own 64-key tile, so a CTA holds 256 keys at
// once and its 16 warps' partial softmaxes are merged in shared memory at
// the end: no split CTAs and no merge kernel (at batch 1 a dependent step
// of ~2 us a layer, v31). Longer contexts take rounds of kWideTiles tiles
// (correct at any length; the launcher's callers keep it to short ones).
// The first round requests the keys of earlier steps before the
// programmatic wait, as LoadFirstKvTilesAroundWait does.
constexpr int kWideTiles = 4;
constexpr int kWideWarps = kWarps * kWideTiles;
static_assert(kWideTiles * kTileKeys == kWideDecodeAttentionKeys, "mma_attention.h's promise");

template <int D>
constexpr size_t WideSharedBytes() {
  const size_t tiles = size_t{kWideTiles} * 2 * kTileKeys * kRowElems<D> * 2;
  const size_t merge = size_t{kWideWarps} * 8 * (D + 2) * 4;  // each warp's o, m and l (MergeSwapAbWarpsAndStore)
  return std::max(tiles, merge);
}

template <int D>
__global__ void __launch_bounds__(kWideWarps * 32, 1) MmaWideDecodeAttentionKernel(PagedAttentionParams p) {
  constexpr int kGroupThreads = kWarps * 32;  // the threads that copy one tile
  extern __shared__ __align__(16) unsigned char shared_raw[];
  auto* tiles = reinterpret_cast<__nv_bfloat16*>(shared_raw);  // [tile of the round][K, V][kTileKeys][kRow]
  __shared__ int32_t staged_table[kStagedTableEntries];        // blocks first_block ..

  kernels::AllowDependentLaunch();
  const AttentionWorkItem item = p.items[blockIdx.x];  // one token (the launcher checks)
  const int kv_head = blockIdx.y;
  const int group = p.num_heads / p.num_kv_heads;  // <= 8 (the launcher checks)
  const int warp = threadIdx.x / 32;
  const int my_tile = warp / kWarps;        // the tile of each round this warp's group copies and reads
  const int warp_key0 = warp % kWarps * 16;  // the warp's keys of it

  const int pos_q = p.positions[item.token_begin];
  const KeySpan span = StageKeySpan<kWideWarps * 32>(p, item, pos_q + 1, staged_table);
  if (span.begin >= span.end) return;  // (one split holds every key: not taken)
  const int begin = span.begin, end = span.end, num_tiles = span.num_tiles;
  const int first_new = item.first_new_position;

  SwapAbState<D> st;
  uint32_t qb[D / 16][2];
  const float scale = p.scale * kLog2e;
  for (int round = 0; round < num_tiles; round += kWideTiles) {
    const int tile = round + my_tile;
    const bool holds = tile < num_tiles;
    // This group's tile, the keys at positions [from, to) of it (all: kRange false).
    auto copy = [&](auto range, int from, int to) {
      LoadKvTileKeys<D, kWideTiles, decltype(range)::value, kGroupThreads, kWideWarps * 32>(
          p, span, staged_table, kv_head, tiles, tile, from, to);
    };
    if (round == 0) {
      // Keys of earlier steps before the wait, this step's after it; one commit group.
      if (holds) copy(std::true_type{}, INT_MIN, first_new);
      kernels::WaitForPrerequisiteGrids();  // q and this step's keys come from the kernel before
      if (holds) copy(std::true_type{}, first_new, INT_MAX);
    } else if (holds) {
      copy(std::false_type{}, 0, 0);
    }
    kernels::CpAsyncCommit();
    if (round == 0) LoadSwapAbQueries<D>(p, item, kv_head, group, qb);
    kernels::CpAsyncWait<0>();
    __syncthreads();  // every group's copies landed
    if (holds) {
      const __nv_bfloat16* k_s = tiles + my_tile * 2 * kTileKeys * kRowElems<D>;
      SwapAbDecodeTile<D>(k_s, warp_key0, begin + tile * kTileKeys + warp_key0, end, pos_q, scale, qb, st);
    }
    __syncthreads();  // the next round's copies, or the merge's staging, overwrite the tiles
  }
  MergeSwapAbWarpsAndStore<D, kWideWarps>(p, item, kv_head, group, st, shared_raw);
}

// Grid (num_items, num_kv_heads): out = sum_z 2^(m_z - M) o_z / sum_z 2^(m_z - M) l_z
// over the splits that hold keys (the kernel's KeysPerSplit decides which).
// A split whose keys a row cannot see left m = -inf: weight 0.
//
// A decode step's merge is a chain of dependent loads, not work (a few
// splits of 8 rows), so it is laid out for the shortest chain: launched as
// a programmatic dependent of the attention kernel, it reads its item and
// context before waiting for the partials; then each thread takes one float4
// of one row's output and requests every split's (max, sum) and float4 of
// that row together, up to kMergeLoadsAtOnce splits at a time, folding them
// in split order with a running max (one round of loads for a short
// context). v18's merge took the splits' (max, sum) pairs a lane each in
// one round and the weighted float4s in a second (2.0 - 2.6 us a layer
// inside the graph at batch 1 and 16); ~8 us serialized before that.
constexpr int kMergeLoadsAtOnce = 8;
template <int D, bool kSplitKeys, int kStages>
__global__ void __launch_bounds__(kWarps * 32) MmaAttentionKernel(PagedAttentionParams p) {
  MmaAttentionBody<D, kSplitKeys, kStages, EarlyKeys::kWholeTiles>(p);
}

template <int D, int kStages>
__global__ void __launch_bounds__(kWarps * 32) MmaDecodeAttentionKernel(PagedAttentionParams p) {
  MmaDecodeAttentionBody<D, kStages, EarlyKeys::kSplitTile>(p);
}

// Steps that mix single-token items (decodes) with longer ones (prefill
// chunks): each CTA takes its item's shape, the swap-AB decode body for one
// token (at most 8 query heads a KV head: the launcher checks), the general
// row shape otherwise. Under the general shape alone a decode item's 8 rows
// sat in one warp of four, which walked its whole context alone: 256 decodes
// beside 14 prompts doubled the attention's time (ernie-bench-cuda
// --mixed-steps, v22). Both bodies stage the same tiles in the same dynamic
// shared memory; each has its own static table. Three CTAs an SM, as the
// general kernel runs at head_dim 128 (168 registers; the union of the two
// bodies took 171, two CTAs an SM).
template <int D, int kStages>
__global__ void __launch_bounds__(kWarps * 32, 3) MmaMixedAttentionKernel(PagedAttentionParams p) {
  if (p.items[blockIdx.x].num_tokens == 1) {
    MmaDecodeAttentionBody<D, kStages, EarlyKeys::kNone>(p);
  } else {
    MmaAttentionBody<D, false, kStages, EarlyKeys::kNone>(p);
  }
}

template <int D>
__global__ void __launch_bounds__(kMergeThreads) MmaMergeSplitsKernel(PagedAttentionParams p) {
  kernels::AllowDependentLaunch();
  const AttentionWorkItem item = p.items[blockIdx.x];
  const int kv_head = blockIdx.y;
  const int group = p.num_heads / p.num_kv_heads;
  const int rows = item.num_tokens * group;
  const int context = p.positions[item.token_begin + item.num_tokens - 1] + 1;
  const int per_split = KeysPerSplit(context, p.num_splits);
  const int active = (context + per_split - 1) / per_split;
  const int64_t first_cta = (int64_t{blockIdx.x} * p.num_kv_heads + kv_head) * p.num_splits;
  kernels::WaitForPrerequisiteGrids();  // the attention kernel's partials
  constexpr int kQuads = D / 4;
  for (int idx = threadIdx.x; idx < rows * kQuads; idx += blockDim.x) {
    const int r = idx / kQuads, d = 4 * (idx % kQuads);
    // Split 0 holds key 0, which every row sees: its max is finite, so the
    // running max never rescales from -inf.
    float m = -INFINITY, l = 0.0f;
    float4 value = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int z0 = 0; z0 < active; z0 += kMergeLoadsAtOnce) {
      float2 ml[kMergeLoadsAtOnce];
      float4 o[kMergeLoadsAtOnce];
#pragma unroll
      for (int u = 0; u < kMergeLoadsAtOnce; ++u) {
        const int64_t cta = first_cta + min(z0 + u, active - 1);  // past `active`: read again, not used
        ml[u] = *reinterpret_cast<const float2*>(p.partial_ml + (cta * kMmaAttentionRows + r) * 2);
        o[u] = *reinterpret_cast<const float4*>(p.partial_out + (cta * kMmaAttentionRows + r) * D + d);
      }
#pragma unroll
      for (int u = 0; u < kMergeLoadsAtOnce; ++u) {
        if (z0 + u >= active) break;
        // A split whose keys this row cannot see has m = -inf: weight 0.
        const float m_new = fmaxf(m, ml[u].x);
        const float keep = exp2f(m - m_new), w = exp2f(ml[u].x - m_new);  // keep: 0 at the first split
        l = l * keep + ml[u].y * w;
        value = make_float4(value.x * keep + o[u].x * w, value.y * keep + o[u].y * w, value.z * keep + o[u].z * w,
                            value.w * keep + o[u].w * w);
        m = m_new;
      }
    }
    const float inv_l = 1.0f / l;
    const RowPlace at = PlaceOf(item, kv_head, group, r);
    auto* out = reinterpret_cast<__nv_bfloat162*>(p.out + (at.token * p.num_heads + at.head) * D + d);
    out[0] = __floats2bfloat162_rn(value.x * inv_l, value.y * inv_l);
    out[1] = __floats2bfloat162_rn(value.z * inv_l, value.w * inv_l);
  }
}

using AttentionKernel = void (*)(PagedAttentionParams);

// The kernel of a step's shape: prefill steps the general kernel's row
// shape, mixed ones too unless swap-AB applies (then the mixed kernel,
// whose union of both bodies costs the prefill CTAs a few spilled
// registers: 2 - 4% slower on prefill alone, v22); decode steps the swap-AB
// kernel when the group fits its 8 columns (and p.decode_swap_ab), else the
// general kernel's key-split shape.
template <int D, int kStages>
AttentionKernel KernelOf(AttentionItems items, bool swap_ab) {
  switch (items) {
    case AttentionItems::kSingleToken:
      return swap_ab ? MmaDecodeAttentionKernel<D, kStages> : MmaAttentionKernel<D, true, kStages>;
    case AttentionItems::kMixed:
      if (swap_ab) return MmaMixedAttentionKernel<D, kStages>;
      break;
    case AttentionItems::kMultiToken:
      break;
  }
  return MmaAttentionKernel<D, false, kStages>;
}

template <int D, int kStages>
cudaError_t Launch(AttentionKernel kernel, const PagedAttentionParams& p, cudaStream_t stream) {
  constexpr size_t kShared = SharedBytes<D, kStages>();
  if (kShared > 48 * 1024) {
    const cudaError_t set = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared);
    if (set != cudaSuccess) return set;
  }
  const dim3 grid(static_cast<unsigned>(p.num_items), static_cast<unsigned>(p.num_kv_heads),
                  static_cast<unsigned>(p.num_splits));
  const cudaError_t launched = kernels::LaunchDependent(kernel, grid, dim3(kWarps * 32), kShared, stream, p);
  if (launched != cudaSuccess || p.num_splits == 1) return launched;
  return kernels::LaunchDependent(MmaMergeSplitsKernel<D>, dim3(grid.x, grid.y), dim3(kMergeThreads), 0, stream, p);
}

// CTAs of a decode kernel with kStages stages the current device runs at
// once (asked once per thread and kernel, the backend's device; 0 if it
// cannot say).
template <int D, int kStages, bool kSwapAb>
int64_t ResidentDecodeCtas() {
  thread_local int64_t resident = [] {
    int device = 0, sms = 0, per_sm = 0;
    const AttentionKernel kernel = KernelOf<D, kStages>(AttentionItems::kSingleToken, kSwapAb);
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SharedBytes<D, kStages>()) !=
            cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kWarps * 32, SharedBytes<D, kStages>()) !=
            cudaSuccess)
      return int64_t{0};
    return int64_t{sms} * per_sm;
  }();
  return resident;
}

template <int D, bool kSwapAb>
cudaError_t LaunchDecode(const PagedAttentionParams& p, cudaStream_t stream) {
  const int64_t ctas = int64_t{p.num_items} * p.num_kv_heads * p.num_splits;
  auto waves = [&](int64_t resident) { return resident > 0 ? (ctas + resident - 1) / resident : INT64_MAX; };
  const int64_t w4 = waves(ResidentDecodeCtas<D, 4, kSwapAb>()), w3 = waves(ResidentDecodeCtas<D, 3, kSwapAb>()),
                w2 = waves(ResidentDecodeCtas<D, 2, kSwapAb>());
  constexpr AttentionItems kDecode = AttentionItems::kSingleToken;
  if (w4 <= w3 && w4 <= w2) return Launch<D, 4>(KernelOf<D, 4>(kDecode, kSwapAb), p, stream);
  if (w3 <= w2) return Launch<D, 3>(KernelOf<D, 3>(kDecode, kSwapAb), p, stream);
  return Launch<D, 2>(KernelOf<D, 2>(kDecode, kSwapAb), p, stream);
}

template <int D>
cudaError_t LaunchWideDecode(const PagedAttentionParams& p, cudaStream_t stream) {
  constexpr size_t kShared = WideSharedBytes<D>();
  if (kShared > 48 * 1024) {
    const cudaError_t set =
        cudaFuncSetAttribute(MmaWideDecodeAttentionKernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared);
    if (set != cudaSuccess) return set;
  }
  const dim3 grid(static_cast<unsigned>(p.num_items), static_cast<unsigned>(p.num_kv_heads));
  return kernels::LaunchDependent(MmaWideDecodeAttentionKernel<D>, grid, dim3(kWideWarps * 32), kShared, stream, p);
}

template <int D>
cudaError_t LaunchShape(const PagedAttentionParams& p, AttentionItems items, cudaStream_t stream) {
  const bool swap_ab = p.decode_swap_ab && p.num_heads / p.num_kv_heads <= kSwapAbMaxGroup;
  if (items != AttentionItems::kSingleToken) return Launch<D, 2>(KernelOf<D, 2>(items, swap_ab), p, stream);
  if (swap_ab && p.wide_decode && p.num_splits == 1) return LaunchWideDecode<D>(p, stream);
  if (swap_ab) return LaunchDecode<D, true>(p, stream);
  return LaunchDecode<D, false>(p, stream);
}

}  // namespace

bool MmaAttentionSupportsHeadDim(int32_t head_dim) {
  return head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 128;
}

AttentionItems AttentionItemsOf(int32_t num_items, int32_t single_token_items) {
  if (single_token_items >= num_items) return AttentionItems::kSingleToken;
  return single_token_items > 0 ? AttentionItems::kMixed : AttentionItems::kMultiToken;
}

cudaError_t LaunchMmaAttention(const PagedAttentionParams& p, AttentionItems items, cudaStream_t stream) {
  const bool single_token_items = items == AttentionItems::kSingleToken;
  const int32_t group = p.num_kv_heads > 0 ? p.num_heads / p.num_kv_heads : 0;
  if (p.q == nullptr || p.items == nullptr || p.block_tables == nullptr || p.positions == nullptr || p.out == nullptr ||
      p.cache.k == nullptr || p.cache.v == nullptr || p.num_items <= 0 || p.num_kv_heads <= 0 ||
      p.num_heads % p.num_kv_heads != 0 || group > (single_token_items ? 16 : kMmaAttentionRows) ||
      p.q_row_stride % 2 != 0 || p.cache.head_dim != p.head_dim || p.cache.num_kv_heads != p.num_kv_heads ||
      p.num_splits < 1 || p.num_splits > kMaxAttentionSplits ||
      (p.num_splits > 1 && (p.partial_out == nullptr || p.partial_ml == nullptr)))
    return cudaErrorInvalidValue;
  switch (p.head_dim) {
    case 16:
      return LaunchShape<16>(p, items, stream);
    case 32:
      return LaunchShape<32>(p, items, stream);
    case 64:
      return LaunchShape<64>(p, items, stream);
    case 128:
      return LaunchShape<128>(p, items, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace ernie::cuda
