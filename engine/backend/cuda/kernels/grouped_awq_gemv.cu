// Grouped expert linears on AWQ int4 weights (see grouped_awq_gemv.h). The
// work split is awq_gemm.cu's decode kernel's along n (a warp owns a 16-row
// tile of the packed layout and a k slice), with a second grid dimension
// over the routed tiles of slots, as in grouped_expert_gemv.cu.
#include <algorithm>

#include "engine/backend/cuda/kernels/awq_blocks.cuh"
#include "engine/backend/cuda/kernels/grouped_awq_gemv.h"
#include "engine/backend/cuda/kernels/grouped_epilogue.cuh"
#include "engine/backend/cuda/kernels/linear_mma.cuh"
#include "engine/backend/cuda/kernels/moe_router_records.cuh"
#include "engine/backend/cuda/kernels/tma.cuh"

namespace ernie::cuda {

namespace {

using kernels::kAwqBlockK;
using kernels::kLinearWarps;
static_assert(kGroupedAwqGemvMaxCtaWarps == kLinearWarps, "the header's bound is the kernel's CTA");

// The weights and records of this CTA's row tiles, asked of the L2, when its
// tile's expert is known before the kernel waits (GroupedAwqGemvParams::
// known_tiles, prefetch_shared, prefetch_slice). A CTA's row tiles are
// consecutive, so each is one range.
__device__ __forceinline__ void PrefetchKnownExpertSlice(const GroupedAwqGemvParams& p, int64_t expert, int k_slices,
                                                         int group_shift) {
  const int64_t row_tiles = (int64_t{p.w.n} + 15) / 16;
  const int64_t tiles_per_cta = kernels::DivBySlices(static_cast<int>(blockDim.x / 32), k_slices);
  const int64_t first = int64_t{blockIdx.x} * tiles_per_cta, end = min(first + tiles_per_cta, row_tiles);
  if (first >= end) return;
  const int64_t packed_words = int64_t{p.w.k} / kAwqBlockK * 32 * 4;  // a row tile's
  const int64_t record_words = 16 * int64_t{kernels::AwqRecordGroups2(p.w.k, group_shift)};
  const uint32_t* packed = p.w.packed + (expert * row_tiles + first) * packed_words;
  const uint32_t* records = p.w.records + (expert * row_tiles + first) * record_words;
  kernels::PrefetchToL2(packed, static_cast<uint32_t>((end - first) * packed_words * 4));
  kernels::PrefetchToL2(records, static_cast<uint32_t>((end - first) * record_words * 4));
}

// Row 0 of xs: w * (x * inv_rms) in bf16 (the routing's normed-row
// expression) from the float32 row x_row (an L2 load: the kernel before's
// output), with its unit sums; the other rows zeros. All threads of the
// CTA; the caller synchronises before reading xs.
template <int kScaleHalves>
__device__ __forceinline__ void StageNormedRow(const float* x_row, const float* norm_weight, float inv_rms, int k,
                                               __nv_bfloat16* xs, float* x_sums) {
  const int quads = k / 4;
  const auto* x = reinterpret_cast<const float4*>(x_row);
  const auto* w = reinterpret_cast<const float4*>(norm_weight);
  for (int q = threadIdx.x; q < quads; q += blockDim.x) {
    const float4 v = __ldcg(x + q), g = __ldg(w + q);
    const __nv_bfloat162 lo = __floats2bfloat162_rn(g.x * (v.x * inv_rms), g.y * (v.y * inv_rms));
    const __nv_bfloat162 hi = __floats2bfloat162_rn(g.z * (v.z * inv_rms), g.w * (v.w * inv_rms));
    reinterpret_cast<uint2*>(xs)[q] =
        make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
  }
  __syncthreads();
  kernels::SumAwqStagedXRows<kScaleHalves>(1, k, xs, x_sums);
}

// The known tiles' x (GroupedAwqGemvParams::known_x): row 0 of xs is the
// RMSNorm of known_x's k floats in bf16, the expression the routing writes
// its normed row with (w * (x * inv_rms)); the other rows are zeros. The
// sums of squares meet in `scratch` (a float a warp). All threads of the
// CTA take part; the caller synchronises before reading xs.
template <int kScaleHalves>
__device__ __forceinline__ void StageNormedXRow(const GroupedAwqGemvParams& p, int k, __nv_bfloat16* xs,
                                                float* x_sums, float* scratch) {
  const int quads = k / 4, warps = blockDim.x / 32;
  // L2 loads: the kernel before last (the routing's input) wrote them.
  const auto* x = reinterpret_cast<const float4*>(p.known_x);
  float square = 0.0f;
  for (int q = threadIdx.x; q < quads; q += blockDim.x) {
    const float4 v = __ldcg(x + q);
    square += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  }
  square = kernels::WarpSum(square);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = square;
  __syncthreads();
  float total = 0.0f;
  for (int i = 0; i < warps; ++i) total += scratch[i];
  StageNormedRow<kScaleHalves>(p.known_x, p.known_norm_weight, rsqrtf(total / static_cast<float>(k) + p.known_eps),
                               k, xs, x_sums);
}

// The folded routing's choice (kFolded launches only), in shared memory.
__device__ __forceinline__ kernels::OneTokenChoice& FoldedChoice() {
  __shared__ kernels::OneTokenChoice choice;
  return choice;
}

// The down launch's expert of tile `tile` as the gate/up launch's first CTA
// published it (MoeRouterRecords::expert_of_tile), or -1 when the flag did
// not come within ~100 us (the caller then chooses from the records: never
// wrong, never a hang). Every thread; thread 0 polls.
__device__ __forceinline__ int PublishedExpert(const MoeRouterRecords& q, int tile) {
  __shared__ int published;
  if (q.tiles_ready == nullptr) return -1;
  if (threadIdx.x == 0)
    published = kernels::PollAtLeast(q.tiles_ready, 1, 1024, 64) != 0 ? __ldcg(q.expert_of_tile + tile) : -1;
  __syncthreads();
  return published;
}

// Until *known_ready reaches its target (GroupedAwqGemvParams): thread 0
// polls with acquire loads, then the CTA's barrier passes what it saw on.
// After ~1 ms without it (a launch that did not count in: a bug, not a
// case) the CTA waits for the kernel before instead, so it is never wrong
// and never hangs.
__device__ __forceinline__ void WaitForKnownTiles(const GroupedAwqGemvParams& p) {
  __shared__ int ready;
  if (threadIdx.x == 0)
    ready = kernels::PollAtLeast(p.known_ready, p.known_ready_target, 8192, 128) >= p.known_ready_target;
  __syncthreads();
  if (!ready) kernels::WaitForPrerequisiteGrids();
}

// Two CTAs an SM for one tile of x at group >= 128 (at most 128 registers,
// two chunks in flight): at m <= 8 the loads in flight, not the math, set the pace.
// kStageX: the tile's 8 slot rows are copied to shared memory first
// with their unit sums (awq_blocks.cuh's StageAwqXRowsWithSums), for 8-slot
// tiles when they fit.
// A CTA has blockDim.x / 32 <= kLinearWarps warps (the launcher sizes it so
// that a small step's CTAs spread evenly over the SMs: PickGroupedCtaWarps).
// kKnownTiles: the launch has known tiles (GroupedAwqGemvParams::known_tiles);
// without it that code is compiled out, so the launches that have none run
// the kernel as it was before it (NOTES.md v34: with the checks in every
// launch, the 21B-A3B batch-1 step at mode 0 was ~25 us slower).
// kLean: one chunk in flight and three CTAs an SM (GroupedAwqGemvParams::lean).
// kWholeChunks: k a multiple of kAwqChunkK (awq_blocks.cuh's AwqComputeChunk).
// kFolded: one token whose experts each CTA chooses from the o_proj's router
// records (GroupedAwqGemvParams::route; tiles of 8 slots with x staged, no
// known tiles): the gate/up launch (wait_first) waits for the o_proj and
// stages the normed residual row itself; the down launch (dependent) chooses
// before its wait, so its weights stream in under the gate/up's tail as
// they do with a routing launch's tables.
template <int kTiles, int kScaleHalves, bool kStageX, bool kKnownTiles, bool kLean = false, bool kWholeChunks = false,
          bool kFolded = false>
__global__ void __launch_bounds__(32 * kLinearWarps, kLean                                ? kernels::kAwqLeanCtasPerSm
                                                     : kTiles == 1 && kScaleHalves == 4 ? 2
                                                                                        : 1)
    GroupedAwqGemvKernel(GroupedAwqGemvParams p, int k_slices, int group_shift) {
  // wait_first: the tile table is the kernel before's (the routing). A down
  // launch may start (p.dependent) once every CTA here has begun, and has
  // the table then: its weights stream in under this kernel's tail
  // (AwqAccumulateSlice waits before reading x).
  //
  // Known tiles (GroupedAwqGemvParams::known_tiles) need no tile table: with
  // known_x they need nothing of the routing's and do not wait for it.
  const int tile_index = blockIdx.y, known = tile_index - p.known_tile0;
  const bool in_known = kKnownTiles && known >= 0 && known < p.known_tiles;
  const bool is_known = p.wait_first && in_known;
  const bool self_normed = kStageX && is_known && p.known_x != nullptr;
  // A down launch's known tiles: x when the gate/up's known CTAs have counted in.
  const bool counted_in = kStageX && !p.wait_first && in_known && p.known_ready != nullptr;
  static_assert(!kFolded || (kTiles == 1 && kStageX && !kKnownTiles), "the folded routing's launches");
  if (p.wait_first && !self_normed) {
    if (is_known && threadIdx.x == 0) PrefetchKnownExpertSlice(p, p.known_expert0 + known, k_slices, group_shift);
    // A folded gate/up launch's shared experts' tiles (the last ones: ids experts .., above every routed id).
    if (kFolded && p.prefetch_shared && tile_index >= p.route.top_k && threadIdx.x == 0)
      PrefetchKnownExpertSlice(p, p.route.experts + (tile_index - p.route.top_k), k_slices, group_shift);
    kernels::WaitForPrerequisiteGrids();
  }
  kernels::AllowDependentLaunch();
  __shared__ float red[kLinearWarps * 16 * 8 * kTiles];  // the cross-warp sum
  extern __shared__ uint4 staged_x[];                     // kStageX: [8][k + pad] bf16
  int expert = 0;
  if constexpr (kFolded) {
    // Every tile of the grid is a choice (max_tiles: the choices).
    kernels::OneTokenChoice& choice = FoldedChoice();
    const int choices = p.route.top_k + p.route.shared_experts;
    expert = p.dependent ? PublishedExpert(p.route, tile_index) : -1;
    if (expert < 0) {
      kernels::ChooseFromRouterRecords(p.route, choice);
      expert = choice.expert_of_tile[tile_index];
    }
    // A down launch's whole slice asked of the L2 under the gate/up's tail (its first chunks come to registers).
    if (p.dependent && p.prefetch_slice && threadIdx.x == 0) PrefetchKnownExpertSlice(p, expert, k_slices, group_shift);
    if (p.wait_first && p.route.tiles_ready != nullptr && blockIdx.x == 0 && tile_index == 0) {
      if (static_cast<int>(threadIdx.x) < choices) {
        p.route.expert_of_tile[threadIdx.x] = choice.expert_of_tile[threadIdx.x];
        __threadfence();
      }
      __syncthreads();
      if (threadIdx.x == 0)
        kernels::StoreRelease(p.route.tiles_ready, 1);
    }
    if (p.wait_first && p.route.topk_ids != nullptr && blockIdx.x == 0 && tile_index == 0 &&
        static_cast<int>(threadIdx.x) < choices) {
      const int j = static_cast<int>(threadIdx.x);
      p.route.topk_ids[j] = j < p.route.top_k ? choice.top.chosen[j] : p.route.experts + j - p.route.top_k;
      p.route.topk_weights[j] = choice.weight_of_choice[j];
    }
  } else {
    if (!self_normed && tile_index >= *p.num_tiles) return;  // the whole CTA: the routing used fewer tiles
    expert = self_normed ? p.known_expert0 + known : p.tile_expert[tile_index];
  }
  const int64_t slot0 = int64_t{tile_index} * 8 * kTiles;
  const int cta_warps = blockDim.x / 32, warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4;
  const int tiles_per_cta = kernels::DivBySlices(cta_warps, k_slices), slice = warp & (k_slices - 1);
  const int64_t row_tiles = (int64_t{p.w.n} + 15) / 16;
  // A row tile past the last (grid rounding) reads the last one again; the epilogue drops its rows.
  const int64_t row_tile = min(int64_t{blockIdx.x} * tiles_per_cta + kernels::DivBySlices(warp, k_slices), row_tiles - 1);
  const int k = p.w.k, groups2 = kernels::AwqRecordGroups2(k, group_shift);
  // Expert `expert`'s arrays (AwqExpertsView; AwqPackedWords and AwqRecordWords are host-side).
  const uint32_t* packed = p.w.packed + expert * row_tiles * 16 * (k / 8);
  const uint32_t* records = p.w.records + expert * row_tiles * 16 * groups2;
  auto slot_row = [&](int64_t slot) -> const __nv_bfloat16* {
    const bool padding = p.x_row == nullptr && p.slot_token != nullptr && p.slot_token[slot] < 0;
    const int64_t row = p.x_row != nullptr ? p.x_row[slot] : padding ? -1 : slot;
    return row >= 0 ? p.x + row * k : nullptr;
  };
  auto* xs = reinterpret_cast<__nv_bfloat16*>(staged_x);
  float* x_sums = kStageX ? kernels::AwqStagedXSums(xs, 8 * kTiles, k) : nullptr;  // the zero points' x sums
  // Only the slots up to the tile's last live one are staged: at batch 1
  // one slot of the 8 holds a row, and staging all 8 (with their unit
  // sums) was ~40% of a CTA's instructions at k = 2,560. The slots past
  // it read as rows without data (AwqAccumulateSlice zeroes their columns).
  auto live_rows_of_tile = [&] {
    int live_rows = 0;
#pragma unroll
    for (int r = 0; r < 8; ++r)
      if (slot_row(slot0 + r) != nullptr) live_rows = r + 1;
    return live_rows;
  };
  // The slot table is the routing's and complete when this kernel starts
  // (wait_first: it waited; a dependent launch: the kernel before waited
  // for the routing before letting it start), so its entries are loaded
  // before the weights: the L1 returns a warp's loads in order, and read
  // after the weights they waited for the chunks in flight first (ncu, v15:
  // 13% of gate/up's stall samples, 15% of down's). With wait_first, x (the
  // routing's input) is ready too: its copy goes out before the weights'
  // loads as well (CopyAwqXRowsAsync) and only the sums wait for it.
  // Otherwise x is the kernel before's output, read after the wait.
  int live_rows = 0;
  if constexpr (kStageX) {
    live_rows = self_normed || kFolded ? 1 : live_rows_of_tile();  // one token: the tile's first slot
    if (p.wait_first && !self_normed && !kFolded)
      kernels::CopyAwqXRowsAsync(live_rows, k, xs, [&](int r) { return slot_row(slot0 + r); });
    // The weights' loads (side-effect-free asm) could be scheduled above
    // these loads and copies; through this empty volatile asm their addresses come after.
    asm volatile("" : "+l"(packed) : : "memory");
  }
  // Set once the routing's slot table may be read (stage_x, after the wait).
  const __nv_bfloat16* x_row[kTiles] = {};
  auto stage_x = [&] {
    if constexpr (kStageX) {
      if (kFolded && p.wait_first) {
        // (inv_rms read back here: a register held across the k loop's start spilled.)
        StageNormedRow<kScaleHalves>(p.route.x, p.route.norm_weight, FoldedChoice().inv_rms, k, xs, x_sums);
      } else if (kFolded) {
        kernels::StageAwqXRowsWithSums<kScaleHalves>(1, k, xs, x_sums, [&](int) { return p.x + slot0 * k; });
      } else if (self_normed) {
        StageNormedXRow<kScaleHalves>(p, k, xs, x_sums, red);
      } else if (p.wait_first) {
        kernels::CpAsyncWait<0>();
        __syncthreads();
        kernels::SumAwqStagedXRows<kScaleHalves>(live_rows, k, xs, x_sums);
      } else if (counted_in) {
        WaitForKnownTiles(p);
        kernels::StageAwqXRowsWithSums<kScaleHalves, false, true>(live_rows, k, xs, x_sums,
                                                                  [&](int r) { return slot_row(slot0 + r); });
      } else {
        kernels::StageAwqXRowsWithSums<kScaleHalves>(live_rows, k, xs, x_sums,
                                                     [&](int r) { return slot_row(slot0 + r); });
      }
      x_row[0] = g < live_rows ? xs + int64_t{g} * (k + kernels::kAwqStagedRowPad) : nullptr;
      __syncthreads();
    } else {
#pragma unroll
      for (int t = 0; t < kTiles; ++t) x_row[t] = slot_row(slot0 + 8 * t + g);
    }
  };
  float acc[kTiles][4] = {};
  constexpr int kInFlight = kLean ? kernels::kAwqLeanInFlight : kernels::kAwqChunksInFlight<kTiles>;
  kernels::AwqAccumulateSlice<kTiles, kScaleHalves, kStageX, kInFlight, kWholeChunks>(
      packed + row_tile * (k / kAwqBlockK) * 32 * 4, records + row_tile * 8 * groups2 * 2, x_row, kStageX ? xs : p.x,
      x_sums, kTiles, k, group_shift, slice, k_slices, acc, stage_x,
      kFolded ? !p.wait_first : !self_normed && !counted_in);
  const int64_t cta_row0 = int64_t{blockIdx.x} * tiles_per_cta * 16;
  kernels::StoreGroupedTile<kTiles>(acc, red, k_slices, cta_row0, p.w.n, slot0, p.epilogue, p.y);
  if (self_normed && p.known_done != nullptr) {
    // Every thread's stores before the count (the down launch reads them once it is complete).
    __threadfence();
    __syncthreads();
    const int64_t first = int64_t{blockIdx.x} * tiles_per_cta;
    if (threadIdx.x == 0 && first < row_tiles)
      atomicAdd(p.known_done, static_cast<uint32_t>(min(first + tiles_per_cta, row_tiles) - first));
  }
}

template <int kTiles, int kScaleHalves, bool kStageX = false, bool kKnownTiles = false, bool kLean = false,
          bool kWholeChunks = false, bool kFolded = false>
cudaError_t LaunchTiles(const GroupedAwqGemvParams& p, int group_shift, cudaStream_t stream) {
  constexpr auto kKernel =
      GroupedAwqGemvKernel<kTiles, kScaleHalves, kStageX, kKnownTiles, kLean, kWholeChunks, kFolded>;
  cudaError_t error = cudaSuccess;
  // (Occupancy as without staging: at most 44 KB of x and 4 KB of sums fit two CTAs an SM.)
  const int64_t resident = kernels::ResidentCtas<kKernel>(&error);
  if (error != cudaSuccess) return error;
  const int64_t row_tiles = (int64_t{p.w.n} + 15) / 16;
  const int64_t tiles = p.expected_tiles > 0 ? p.expected_tiles : p.max_tiles;
  // As grouped_expert_gemv.cu: the k split is sized for the tiles the host
  // expects to run, each with its share of the resident CTAs.
  int k_slices = p.k_slices > 0 ? p.k_slices
                                : kernels::PickKSlices(row_tiles, kernels::AwqChunks(p.w.k),
                                                       std::max<int64_t>(1, resident / tiles));
  // A CTA size asked for takes the k slices its warps divide into.
  while (p.cta_warps > 0 && p.cta_warps % k_slices != 0) k_slices /= 2;
  const size_t staged = kStageX ? static_cast<size_t>(kernels::AwqStagedXBytes(8 * kTiles, p.w.k, kScaleHalves)) : 0;
  auto ctas_of = [&](int warps) { return tiles * ((row_tiles + warps / k_slices - 1) / (warps / k_slices)); };
  int cta_warps = p.cta_warps > 0 ? p.cta_warps : kLinearWarps;
  // Only a step whose CTAs of kLinearWarps fit one wave is worth balancing.
  if (p.cta_warps == 0 && ctas_of(kLinearWarps) <= resident) {
    const int sms = kernels::MultiprocessorCount(&error);
    if (error != cudaSuccess) return error;
    cta_warps = PickGroupedCtaWarps(kLinearWarps, k_slices, sms, ctas_of, [&](int warps) {
      return kernels::ResidentCtasWithShared<kKernel>(staged, &error, warps);
    });
    if (error != cudaSuccess) return error;
  }
  const int64_t tiles_per_cta = cta_warps / k_slices;
  const dim3 grid(static_cast<unsigned>((row_tiles + tiles_per_cta - 1) / tiles_per_cta),
                  static_cast<unsigned>(p.max_tiles));
  if (p.dependent || p.wait_first)
    return kernels::LaunchDependent(kKernel, grid, dim3(32 * cta_warps), staged, stream, p, k_slices, group_shift);
  kKernel<<<grid, 32 * cta_warps, staged, stream>>>(p, k_slices, group_shift);
  return cudaGetLastError();
}

// The folded routing's launches (GroupedAwqGemvParams::route): the one-token
// kernel with x staged, on the lean loop where the launch asks for it.
template <int kScaleHalves>
cudaError_t LaunchFolded(const GroupedAwqGemvParams& p, int group_shift, cudaStream_t stream) {
  if (!GroupedAwqGemvStagesX(8, p.w.k, p.w.group_size)) return cudaErrorInvalidValue;
  const bool whole = kernels::AwqWholeChunks(p.w.k);
  if constexpr (kScaleHalves == 4)
    if (p.lean)
      return whole ? LaunchTiles<1, kScaleHalves, true, false, true, true, true>(p, group_shift, stream)
                   : LaunchTiles<1, kScaleHalves, true, false, true, false, true>(p, group_shift, stream);
  return whole ? LaunchTiles<1, kScaleHalves, true, false, false, true, true>(p, group_shift, stream)
               : LaunchTiles<1, kScaleHalves, true, false, false, false, true>(p, group_shift, stream);
}

template <int kScaleHalves>
cudaError_t LaunchForGroup(const GroupedAwqGemvParams& p, int group_shift, cudaStream_t stream) {
  if (p.route.on()) return LaunchFolded<kScaleHalves>(p, group_shift, stream);
  switch (p.tile_rows) {
    case 8:
      // Known tiles come with one-token steps only, whose tiles are of 8 slots.
      if (GroupedAwqGemvStagesX(8, p.w.k, p.w.group_size)) {
        if (p.known_tiles > 0) return LaunchTiles<1, kScaleHalves, true, true>(p, group_shift, stream);
        // (Groups >= 128 only: the shorter groups' loop spills at the lean register bound.)
        if constexpr (kScaleHalves == 4)
          if (p.lean)
            return kernels::AwqWholeChunks(p.w.k)
                       ? LaunchTiles<1, kScaleHalves, true, false, true, true>(p, group_shift, stream)
                       : LaunchTiles<1, kScaleHalves, true, false, true>(p, group_shift, stream);
        return kernels::AwqWholeChunks(p.w.k)
                   ? LaunchTiles<1, kScaleHalves, true, false, false, true>(p, group_shift, stream)
                   : LaunchTiles<1, kScaleHalves, true>(p, group_shift, stream);
      }
      return p.known_tiles > 0 ? LaunchTiles<1, kScaleHalves, false, true>(p, group_shift, stream)
                               : LaunchTiles<1, kScaleHalves>(p, group_shift, stream);
    case 16: return LaunchTiles<2, kScaleHalves>(p, group_shift, stream);
    case 32: return LaunchTiles<4, kScaleHalves>(p, group_shift, stream);
    case 64: return LaunchTiles<8, kScaleHalves>(p, group_shift, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

bool GroupedAwqGemvStagesX(int32_t tile_rows, int32_t k, int32_t group_size) {
  return tile_rows == 8 &&
         kernels::AwqStagedXBytes(8, k, kernels::AwqScaleHalves(group_size)) <= kernels::kAwqMaxStagedXBytes;
}

int CheckedGroupShift(const AwqExpertsView& w) {
  if (w.packed == nullptr || w.records == nullptr || !kernels::Aligned16(w.packed) || !kernels::Aligned16(w.records))
    return -1;
  if (w.experts < 1 || w.n < 8 || w.n % 8 != 0 || w.k < kAwqBlockK || w.k % kAwqBlockK != 0) return -1;
  if (w.group_size < 32 || (w.group_size & (w.group_size - 1)) != 0 || w.k % w.group_size != 0) return -1;
  return __builtin_ctz(static_cast<unsigned>(w.group_size));
}

int CheckedGroupShift(const GroupedAwqGemvParams& p, bool tiled_gemm) {
  const int group_shift = CheckedGroupShift(p.w);
  if (group_shift < 0 || p.x == nullptr || p.y == nullptr || !kernels::Aligned16(p.x)) return -1;
  if (!tiled_gemm && (p.tile_expert == nullptr || p.num_tiles == nullptr || p.rows != 0)) return -1;
  if (p.rows < 0 || p.max_tiles < 1 || p.max_tiles > 65535) return -1;
  if (p.epilogue == GroupedEpilogue::kSiluMulBf16 && p.w.n % 16 != 0) return -1;
  const bool known = p.epilogue == GroupedEpilogue::kStoreF32 || p.epilogue == GroupedEpilogue::kSiluMulBf16 ||
                     (tiled_gemm && p.epilogue == GroupedEpilogue::kStoreBf16);
  return known ? group_shift : -1;
}

cudaError_t LaunchGroupedAwqGemv(const GroupedAwqGemvParams& p, cudaStream_t stream) {
  const int group_shift = CheckedGroupShift(p);
  if (group_shift < 0) return cudaErrorInvalidValue;
  if (p.k_slices != 0 && p.k_slices != 1 && p.k_slices != 2 && p.k_slices != 4 && p.k_slices != 8)
    return cudaErrorInvalidValue;
  if (p.cta_warps < 0 || p.cta_warps > kLinearWarps) return cudaErrorInvalidValue;
  if (p.cta_warps > 0 && p.k_slices > 0 && p.cta_warps % p.k_slices != 0) return cudaErrorInvalidValue;
  if (p.route.on()) {
    // One token's choices, a tile each; the gate/up launch (wait_first: its x the residual row) or the down
    // launch (dependent: its x the gate/up's rows, one a tile).
    const MoeRouterRecords& r = p.route;
    if (!MoeRouterRecordsValid(r) || r.tile_rows != 8 || p.tile_rows != 8 ||
        p.max_tiles != r.top_k + r.shared_experts || p.wait_first == p.dependent || p.known_tiles != 0 ||
        p.x_row != nullptr || p.slot_token != nullptr || (p.wait_first && r.hidden != p.w.k))
      return cudaErrorInvalidValue;
  }
  if (kernels::AwqScaleHalves(p.w.group_size) == 4) return LaunchForGroup<4>(p, group_shift, stream);
  return LaunchForGroup<1>(p, group_shift, stream);
}

}  // namespace ernie::cuda
