// The experts' linears of a mixture-of-experts layer on AWQ int4 weights in
// one launch: grouped_expert_gemv.h's tile/slot interface (tiles of slots
// from moe_routing.h's alignment, a device-side tile count, the two
// epilogues) over experts stacked in awq_gemm.h's repacked layout. Each CTA
// reads its expert's packed rows once for the whole tile and dequantises
// them in registers (the k loop of awq_gemm.cu's decode kernel, shared
// through awq_blocks.cuh), so a decode step reads a quarter of the bf16
// experts' bytes plus the scale/zero records. An 8-slot tile's x rows are
// staged in shared memory first when they fit (kAwqMaxStagedXBytes).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/backend/cuda/kernels/awq_gemm.h"
#include "engine/backend/cuda/kernels/grouped_expert_gemv.h"
#include "engine/backend/cuda/kernels/moe_routing.h"

namespace ernie::cuda {

// Device view of `experts` AWQ linears of the same n x k, stacked: expert e's
// arrays start at packed + e AwqPackedWords(n, k) and records + e
// AwqRecordWords(n, k, group_size) (both multiples of 16 bytes).
struct AwqExpertsView {
  const uint32_t* packed = nullptr;   // [experts][AwqPackedWords(n, k)], 16-byte aligned
  const uint32_t* records = nullptr;  // [experts][AwqRecordWords(n, k, group_size)], 16-byte aligned
  int32_t experts = 0;
  int32_t n = 0;           // output features of one expert, a multiple of 8 (16 for kSiluMulBf16)
  int32_t k = 0;           // input features, a multiple of 64 and of group_size
  int32_t group_size = 0;  // a power of two >= 32
};

struct GroupedAwqGemvParams {
  const __nv_bfloat16* x = nullptr;      // [*, k] activations, 16-byte aligned
  const int32_t* x_row = nullptr;        // [slots] row of x for each slot, -1 for a zero row; nullptr: slot s reads row s
  // The GEMV only, with x_row nullptr: [slots] the alignment's slot_token;
  // slots it marks as padding (-1) read as zero rows (their outputs are
  // zeros) instead of row s. At batch 1 seven of a tile's 8 slots are
  // padding, which the down launch staged all the same (ncu, v15: a quarter
  // of its stall samples on that staging). nullptr: every slot is read.
  const int32_t* slot_token = nullptr;
  AwqExpertsView w;
  // [max_tiles] expert of each tile (< w.experts). The tiled GEMM only:
  // nullptr puts every tile on expert 0 (a dense linear, LaunchAwqTiledGemm).
  const int32_t* tile_expert = nullptr;
  // [1] tiles in use (device side). The tiled GEMM only: nullptr is max_tiles.
  const int32_t* num_tiles = nullptr;
  void* y = nullptr;                     // per `epilogue` (grouped_expert_gemv.h), n = w.n
  int32_t max_tiles = 0;                 // grid size along tiles: an upper bound of *num_tiles
  int32_t tile_rows = 8;                 // slots per tile: 8, 16, 32 or 64
  GroupedEpilogue epilogue = GroupedEpilogue::kStoreF32;
  int32_t expected_tiles = 0;            // host's estimate of *num_tiles, to size the k split (0: max_tiles)
  // As GroupedExpertGemvParams::dependent (the GEMV too): only x may come
  // from the kernel before; the tile table, x_row and slot_token must be
  // older (the GEMV reads them before its wait).
  bool dependent = false;
  // The GEMV only: launched as a programmatic dependent of the kernel that
  // writes the tile table (the routing), waiting for it before reading
  // anything; saves the launch gap. A `dependent` launch after it is safe.
  bool wait_first = false;
  // The GEMV only: k slices a 16-row tile is split into (1, 2, 4 or 8, each
  // a warp), or 0: as many as fill the resident CTAs once for the
  // expected tiles. (Batch 1 gets 1: each warp streams a whole row tile.)
  int32_t k_slices = 0;
  // The GEMV only: warps a CTA (1 - kGroupedAwqGemvMaxCtaWarps, a multiple
  // of the k slices), or 0: the most, fewer when a step's CTAs fit one wave
  // and smaller ones spread more evenly over the SMs (batch 1 on the
  // two-chunk loop: 6 at gate/up, 5 at down on an H200; on the lean loop 8
  // and 4, with two k slices; the backend asks for 8 at one token and 6 at
  // 3 - 8 tokens instead, cuda_moe_forward.cc GroupedAwqCtaWarps).
  int32_t cta_warps = 0;
  // The GEMV's tiles of 8 slots with x staged (steps of up to ~50 tokens)
  // and groups >= 128: the lean k loop, one chunk in flight with three CTAs
  // an SM (awq_blocks.cuh kAwqLeanInFlight), so the k split sized for the
  // resident CTAs doubles. Ignored elsewhere (shorter groups' loop would
  // spill at its register bound), and by launches with known tiles
  // (moe_early_shared_experts 1 - 3), which keep the two-chunk loop.
  bool lean = false;
  // The tiled GEMM only: slots at or past `rows` are neither read nor
  // stored, so y needs only `rows` rows (a dense linear of m rows in tiles
  // of tile_rows). 0: every slot of the tiles.
  int32_t rows = 0;
  // The GEMV with wait_first only: tiles [known_tile0, known_tile0 +
  // known_tiles) hold experts known_expert0, known_expert0 + 1, ... whatever
  // the routing chooses (one token: its distinct choices sorted, so the
  // shared experts' tiles follow the top_k routed ones). Their CTAs ask the
  // L2 for their weight slices before waiting for the routing, so those
  // bytes stream in while it runs. 0 tiles: none known. Only launches in
  // tiles of 8 slots (those of one-token steps) take them; others run as
  // though none were known.
  int32_t known_tile0 = 0;
  int32_t known_tiles = 0;
  int32_t known_expert0 = 0;
  // With known tiles of a one-token step in tiles of 8 slots (x staged in
  // shared memory): the float32 row whose RMSNorm (known_norm_weight,
  // known_eps) is x's only row, as the routing normalises it. The known
  // tiles' CTAs then stage it themselves and compute without waiting for
  // the routing, which must have been launched with trigger_after_wait
  // (moe_routing.h): known_x is complete when this kernel starts.
  const float* known_x = nullptr;
  const float* known_norm_weight = nullptr;
  float known_eps = 1e-5f;
  // The self-staging known tiles above: each CTA adds its row tiles here
  // once its outputs are stored (a release), or nullptr.
  uint32_t* known_done = nullptr;
  // A down launch (not wait_first) after such a gate/up launch: its known
  // tiles' CTAs read their x (the gate/up outputs of those tiles) once
  // *known_ready reaches known_ready_target (the known tiles times the
  // gate/up's 16-row tiles), not after the whole gate/up launch; they
  // read it from the L2. Should the count not come, they wait for the
  // launch before after a bounded spin. The counter is zeroed again by a
  // later kernel (MoeCombineParams::reset) before the next gate/up adds.
  const uint32_t* known_ready = nullptr;
  uint32_t known_ready_target = 0;
  // The GEMV only, one token routed by its records (moe_routing.h
  // MoeRouterRecords: CudaBackendOptions::moe_fold_routing): every CTA
  // chooses the token's experts itself, and tile t is the t-th smallest
  // chosen id (max_tiles: the choices; tile_rows 8; x staged, which
  // GroupedAwqGemvStagesX says). The gate/up launch sets wait_first (it
  // waits for the o_proj that wrote the records, then stages the normed
  // residual row, route.x, itself: x, x_row and slot_token unused, the
  // latter two nullptr); the down launch sets dependent (before its wait it
  // reads the expert of its tile that the gate/up's first CTA published,
  // route.expert_of_tile, choosing itself only if that is late, and reads
  // row 8t of x for tile t). tile_expert and num_tiles are neither read nor
  // written (expert_of_tile may be the same buffer as tile_expert).
  MoeRouterRecords route = {};
  // A folded gate/up launch (route on, wait_first): the CTAs of the shared
  // experts' tiles, whose experts need no choice, ask the L2 for their
  // weight slices before they wait for the o_proj
  // (CudaBackendOptions::moe_fold_prefetch_shared).
  bool prefetch_shared = false;
  // A folded down launch (route on, dependent): each CTA asks the L2 for its
  // expert's weight slice once it knows the expert, before it waits for the
  // gate/up launch (CudaBackendOptions::moe_fold_prefetch_down).
  bool prefetch_slice = false;
};
// Whether the GEMV stages x in shared memory for tiles of tile_rows slots
// at this k and group size (the template the known tiles' options need).
bool GroupedAwqGemvStagesX(int32_t tile_rows, int32_t k, int32_t group_size);

// The grouped GEMV's largest CTA, in warps (kernels/linear_mma.cuh's
// kLinearWarps, which its launcher checks this against).
constexpr int32_t kGroupedAwqGemvMaxCtaWarps = 8;

// Warps a CTA of the grouped GEMV (a multiple of k_slices, <= max_warps)
// for `ctas_of(w)` CTAs of w warps, `resident_of(w)` of which the SMs hold
// at once: a step of a few tiles (batch 1: 6 routed experts and the shared
// ones) runs in one wave, and the SM holding the most warps sets its time.
// 192 CTAs of 8 warps on 132 SMs put 16 warps on 60 SMs and 8 on the rest
// (ncu, v15: 12 warps an SM on average, 0.36 issued a scheduler cycle);
// 256 CTAs of 6 put at most 12 on any. Among the sizes whose grid fits the
// resident CTAs once, the one with the fewest warps on the fullest SM
// (ceil(ctas / SMs) x w), the larger CTA on a tie; max_warps when none fits
// (a large step: many waves either way). Host side.
template <typename CtasOf, typename ResidentOf>
int PickGroupedCtaWarps(int max_warps, int k_slices, int sms, const CtasOf& ctas_of, const ResidentOf& resident_of) {
  int best = max_warps;
  int64_t best_load = -1;
  for (int w = max_warps; w >= k_slices; w -= k_slices) {
    const int64_t ctas = ctas_of(w), resident = resident_of(w);
    if (resident <= 0 || ctas > resident) continue;
    const int64_t load = (ctas + sms - 1) / sms * w;
    if (best_load < 0 || load < best_load) best = w, best_load = load;
  }
  return best;
}

// log2(w.group_size) when w is a valid view for the grouped int4 kernels
// (pointers set and 16-byte aligned, n % 8 == 0, k a multiple of 64 and of
// a power-of-two group >= 32), else -1.
int CheckedGroupShift(const AwqExpertsView& w);

// The same for the whole launch (the view, x, y, the tile table, sizes, a
// known epilogue): every grouped int4 launcher (GEMV and GEMM) checks first.
// `tiled_gemm` admits what only the tiled GEMM does: no tile tables, a rows
// bound, the kStoreBf16 epilogue.
int CheckedGroupShift(const GroupedAwqGemvParams& p, bool tiled_gemm = false);

// cudaErrorInvalidValue for a null or misaligned pointer, a size out of
// range, a k_slices other than 0, 1, 2, 4 or 8, or a cta_warps out of
// 0 - 8 or not a multiple of the k slices; otherwise the launch's error.
// LaunchGroupedAwqGemm refuses a nonzero k_slices or cta_warps (it does not
// split k, its CTAs are its own) and wait_first.
// Allocates nothing; no host wait.
cudaError_t LaunchGroupedAwqGemv(const GroupedAwqGemvParams& p, cudaStream_t stream);

}  // namespace ernie::cuda
