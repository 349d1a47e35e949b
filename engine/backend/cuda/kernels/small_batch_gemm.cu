// The small-batch GEMM on wgmma (see small_batch_gemm.h).
//
// A CTA: one warpgroup (4 warps), 64 weight rows (wgmma's M, the A operand),
// one k slice of 64 - 512, and up to 128 x rows (wgmma's N, the B operand,
// padded with zero rows to N); steps of more rows take a second block of 128
// on grid z (its CTAs read the same weights, mostly from L2). Shared memory,
// 1,024-byte aligned: the weight tile as slice_k / 64 swizzled [64 x 64]
// chunks and the x slice as as many [N x 64] chunks (wgmma.cuh gives the
// layout), both loaded by the TMA (tensor_map.h, tma.cuh), one instruction
// a box: the weights before the programmatic wait (they never depend on
// earlier kernels), each x chunk after it with an mbarrier of its own, so
// chunk q's four k-steps of wgmma start as soon as its bytes are in. AWQ
// int4 weights are staged by the CTA's own threads instead (StageInt4Rows),
// also before the wait.
//
// The split-k sum (cluster_k_reduce.cuh) then reuses the operands' shared
// memory: each CTA stores its partial tile grouped by owner rank into a send
// area, and once every CTA of the cluster is past its products (a cluster
// barrier whose arrival comes after them) sends each owner its block with one
// bulk copy into the owner's receive area, counted by the owner's mbarrier.
// Without the reuse down_proj's k = 3,072 (six slices of 512) did not fit at
// 65 - 128 rows. The first wgmma version staged with cp.async and pushed
// every accumulator as a remote store: 2,750 instructions a warp at 64 rows
// (ncu, v21 run5), 16.7 us for the 0.3b gate|up where cuBLAS took 6.1; this
// one, 976 instructions and 12.2 us (run6; inside the graph the weights'
// load overlaps the kernel before).
#include <algorithm>

#include "engine/backend/cuda/kernels/awq_blocks.cuh"
#include "engine/backend/cuda/kernels/cluster_k_reduce.cuh"
#include "engine/backend/cuda/kernels/common.cuh"
#include "engine/backend/cuda/kernels/linear_mma.cuh"
#include "engine/backend/cuda/kernels/small_batch_gemm.h"
#include "engine/backend/cuda/kernels/tensor_map.h"
#include "engine/backend/cuda/kernels/tma.cuh"
#include "engine/backend/cuda/kernels/wgmma.cuh"

namespace ernie::cuda {

namespace {

using kernels::kPartStride;
using kernels::kReduceMaxSlices;
using kernels::kReduceTileRows;

constexpr int kThreads = 128;  // one warpgroup
constexpr int kTileRows = kReduceTileRows;
constexpr int kChunkK = 64;                        // bf16 of one 128-byte swizzled row
constexpr int kMaxChunks = 512 / kChunkK;          // the largest slice
constexpr int kBoxRows = 32;                       // weight rows a TMA box (kSiluMul's gate / up halves)
constexpr int64_t kAlignSlack = 1024;              // dynamic shared memory is only 16-byte aligned
constexpr int kMaxXRows = 128;                     // x rows of a CTA (wgmma's N)
constexpr int64_t ChunkBytes(int rows) { return int64_t{rows} * kChunkK * 2; }
// One owner's block of partial sums (the bytes a bulk copy sends).
constexpr int64_t OwnerBlockBytes(int slices, int x_rows) {
  return int64_t{kernels::OwnedRows(slices, x_rows)} * kPartStride * 4;
}

constexpr int64_t SharedBytes(int slice_k, int slices, int x_rows) {
  const int64_t staged = int64_t{slice_k / kChunkK} * (ChunkBytes(kTileRows) + ChunkBytes(x_rows));
  const int64_t summed = 2 * slices * OwnerBlockBytes(slices, x_rows);  // send and receive areas
  return kAlignSlack + std::max(staged, summed);
}

// kInt4: warp w stages the CTA's weight rows 16 w .. 16 w + 15 from the
// repacked 16-row tile `tile` (awq_gemm.h). For each 64-k block of the
// slice, lane 4 g + c's 16 bytes are four words; word 2 h + i holds eight
// values of row g + 8 i at k = 32 h + 8 c .. + 7, which is the 16-byte unit
// 4 h + c of that row's 128 bytes, stored at unit ^ (row % 8) (wgmma.cuh's
// swizzle: where the TMA would have put it). Lanes of odd g store their two
// halves in the other order, so the 8 lanes of each 128-byte store phase
// (g = 2t, 2t + 1) cover all 8 units of the bank rows (the same order for
// both put rows g and g + 1 on the same 16 banks: two wavefronts a store).
// A tile past the weight's rows stages zeros, as the TMA fills rows past n.
__device__ __forceinline__ void StageInt4Rows(const AwqWeightsView& w, int group_shift, int64_t tile, int k0,
                                              int chunks, unsigned char* ws) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const bool live = tile < (int64_t{w.n} + 15) / 16;
  const int64_t source = live ? tile : 0;  // a dead tile's addresses stay in bounds; its values are not used
  const uint4* packed = reinterpret_cast<const uint4*>(w.packed) + (source * (w.k / kChunkK) + k0 / kChunkK) * 32 + lane;
  const uint32_t* records = w.records + (source * 8 + g) * kernels::AwqRecordGroups2(w.k, group_shift) * 2;
  // Every chunk's nibbles requested first, then dequantised chunk by chunk.
  // The address is clamped, not just guarded: LoadStreaming16 has no side
  // effects, so the compiler may issue it for q >= chunks too (awq_blocks.cuh
  // saw it hoist such a load), which past the last block reads off the end.
  uint4 v[kMaxChunks];
#pragma unroll
  for (int q = 0; q < kMaxChunks; ++q)
    if (q < chunks) v[q] = kernels::LoadStreaming16(packed + min(q, chunks - 1) * 32);
#pragma unroll
  for (int q = 0; q < kMaxChunks; ++q) {
    if (q >= chunks) break;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int h = (j / 2) ^ (g & 1), i = j % 2, row = 16 * warp + g + 8 * i, unit = 4 * h + c;
      const uint32_t rec = __ldg(records + ((k0 + q * kChunkK + 32 * h) >> group_shift) * 2 + i);
      const uint4 values =
          live ? kernels::AwqDequantWord(kernels::AwqWordOf(v[q], 2 * h + i), rec) : make_uint4(0, 0, 0, 0);
      *reinterpret_cast<uint4*>(ws + q * ChunkBytes(kTileRows) + row * 128 + (unit ^ (row % 8)) * 16) = values;
    }
  }
}

template <int kXTiles, bool kInt4>
__global__ void __launch_bounds__(kThreads)
    SmallBatchGemmKernel(const SmallBatchGemmParams p, const __grid_constant__ CUtensorMap w_map,
                        const __grid_constant__ CUtensorMap x_map, int slice_k, int slices, int group_shift) {
  constexpr int kXRows = 8 * kXTiles;
  extern __shared__ __align__(16) unsigned char smem_raw[];  // aligned to 1,024 below
  // [0]: the weights; [1]: the partial sums this CTA receives; [2 + q]: x chunk q.
  __shared__ uint64_t bars[2 + kMaxChunks];
  unsigned char* smem = smem_raw + ((1024 - (kernels::SharedAddress(smem_raw) & 1023)) & 1023);
  const int chunks = slice_k / kChunkK;
  auto* ws = reinterpret_cast<__nv_bfloat16*>(smem);      // chunks x [64 x 64]
  __nv_bfloat16* xs = ws + chunks * kTileRows * kChunkK;  // chunks x [kXRows x 64]
  // Once the products are done: the send area, then the receive area.
  const int owned = kernels::OwnedRows(slices, kXRows);
  auto* send = reinterpret_cast<float*>(smem);
  float* receive = send + slices * owned * kPartStride;

  const int rank = blockIdx.x;  // the cluster spans gridDim.x: rank = slice
  const int x_row0 = static_cast<int>(blockIdx.z) * kMaxXRows, rows = min(p.m - x_row0, kMaxXRows);
  // kSiluMul: gate rows half_row0 .. + 31 and the matching up rows; else rows row0 .. row0 + 63.
  const bool silu = p.epilogue == SmallBatchEpilogue::kSiluMul;
  const int row0 = static_cast<int>(blockIdx.y) * kTileRows, half_row0 = static_cast<int>(blockIdx.y) * kBoxRows;
  const int k0 = rank * slice_k;
  const int valid_w = silu ? kTileRows : min(kTileRows, p.n - row0);
  if (threadIdx.x == 0) {
    kernels::MbarrierInit(&bars[0], 1);
    kernels::MbarrierInit(&bars[1], 1);
    for (int q = 0; q < chunks; ++q) kernels::MbarrierInit(&bars[2 + q], 1);
    kernels::FenceMbarrierInit();
    // The weights never depend on the kernels before: requested before the wait, with an L2
    // evict_first policy (read once a step; the 0.3b bf16 at 64 rows 0.784 - 0.793 ms against 0.797 -
    // 0.810 without it on an H100, NOTES.md v47).
    if (!kInt4) {
      kernels::MbarrierArriveExpectBytes(&bars[0], static_cast<uint32_t>(chunks * ChunkBytes(kTileRows)));
      const int first = silu ? half_row0 : row0, second = silu ? p.n / 2 + half_row0 : row0 + kBoxRows;
      for (int q = 0; q < chunks; ++q) {
        __nv_bfloat16* tile = ws + q * kTileRows * kChunkK;
        kernels::TmaLoad2d(tile, &w_map, k0 + q * kChunkK, first, &bars[0], /*evict_first=*/true);
        kernels::TmaLoad2d(tile + kBoxRows * kChunkK, &w_map, k0 + q * kChunkK, second, &bars[0],
                           /*evict_first=*/true);
      }
    }
    // Every other slice's block of this rank's rows, announced now (the copies may come before the
    // wait below); its own block it reads where it stored it.
    kernels::MbarrierArriveExpectBytes(&bars[1],
                                       static_cast<uint32_t>((slices - 1) * OwnerBlockBytes(slices, kXRows)));
  }
  kernels::AllowDependentLaunch();
  if constexpr (kInt4) {
    // kSiluMul: 32 gate rows (tiles 2 y, 2 y + 1) and the matching 32 up rows (n / 2 is a multiple of 32).
    const int warp = threadIdx.x / 32;
    const int64_t tile = silu ? (warp < 2 ? half_row0 / 16 + warp : (p.n / 2 + half_row0) / 16 + warp - 2)
                              : row0 / 16 + warp;
    StageInt4Rows(p.awq, group_shift, tile, k0, chunks, reinterpret_cast<unsigned char*>(ws));
    kernels::FenceSharedForAsyncProxy();  // wgmma reads the tile through the async proxy
  }
  __syncthreads();  // the mbarriers are initialised (and an int4 tile staged) for every thread
  kernels::WaitForPrerequisiteGrids();
  if (threadIdx.x == 0) {
    for (int q = 0; q < chunks; ++q) {
      kernels::MbarrierArriveExpectBytes(&bars[2 + q], static_cast<uint32_t>(ChunkBytes(kXRows)));
      kernels::TmaLoad2d(xs + q * kXRows * kChunkK, &x_map, k0 + q * kChunkK, x_row0, &bars[2 + q]);
    }
  }

  float acc[kXTiles][4] = {};
  const uint32_t w_at = kernels::SharedAddress(ws), x_at = kernels::SharedAddress(xs);
  if (!kInt4) kernels::MbarrierWait(&bars[0], 0);
  for (int q = 0; q < chunks; ++q) {
    kernels::MbarrierWait(&bars[2 + q], 0);
    kernels::WgmmaFence();
#pragma unroll
    for (int s = 0; s < kChunkK / 16; ++s) {
      const uint64_t a = kernels::WgmmaDescriptor128B(w_at + static_cast<uint32_t>(ChunkBytes(kTileRows) * q + 32 * s));
      const uint64_t b = kernels::WgmmaDescriptor128B(x_at + static_cast<uint32_t>(ChunkBytes(kXRows) * q + 32 * s));
      kernels::WgmmaBf16<kXTiles>(acc, a, b, true);
    }
    kernels::WgmmaCommit();
  }
  kernels::WgmmaWait<0>();
  __syncthreads();  // every warp's products are done: the operands' shared memory is free
  // The cluster barrier: once every CTA has arrived, each runs (distributed shared memory's
  // rule), has its mbarriers initialised (fenced above) and may receive.
  kernels::ClusterArrive();

  kernels::StorePartialsByOwner<kXTiles>(acc, send, slices);
  // The input norm's row scales, while the other CTAs finish their products
  // (after the programmatic wait: the kernel before wrote the sums).
  __shared__ float row_scale[kMaxXRows];
  const bool row_norm = p.row_norm.sumsq != nullptr;
  if (row_norm) kernels::ComputeRowScales<kThreads>(p.row_norm, row_scale, owned, slices, rank, x_row0, rows);
  kernels::FenceSharedForAsyncProxy();  // the bulk copies read the send area through the async proxy
  __syncthreads();
  kernels::ClusterWait();  // every CTA of the cluster may receive
  if (threadIdx.x == 0) {
    const uint32_t block_bytes = static_cast<uint32_t>(OwnerBlockBytes(slices, kXRows));
    // Not to itself: a bulk copy into the cluster's shared memory is for another CTA's (compute-
    // sanitizer's memcheck rejects one into the CTA's own, NOTES.md v24).
    for (int owner = 0; owner < slices; ++owner)
      if (owner != rank)
        kernels::BulkCopyToCluster(kernels::ClusterSharedAddress(receive + rank * owned * kPartStride, owner),
                                 send + owner * owned * kPartStride, block_bytes,
                                 kernels::ClusterSharedAddress(&bars[1], owner));
    kernels::BulkCopiesWaitRead();
  }
  kernels::MbarrierWait(&bars[1], 0);  // every other slice's block of this rank's rows is in
  kernels::SumAndFinish<kThreads>(p, receive, send + rank * owned * kPartStride, row_norm ? row_scale : nullptr,
                                  kXRows, slices, rank, row0, half_row0, valid_w, x_row0, rows);
}

using KernelFn = void (*)(const SmallBatchGemmParams, const CUtensorMap, const CUtensorMap, int, int, int);

// wgmma's N for a CTA's rows: the rows of its first block of x, rounded up.
int XTilesFor(int m) { return m <= 16 ? 2 : m <= 32 ? 4 : m <= 64 ? 8 : 16; }

template <int kXTiles, bool kInt4>
struct Bucket {
  static constexpr KernelFn kKernel = SmallBatchGemmKernel<kXTiles, kInt4>;
  // Shared-memory opt-in (once per process): the dynamic bytes a CTA may
  // ask for, 0 with `*error` set on failure.
  static int64_t OptIn(cudaError_t* error) {
    return kernels::OptInToMaxDynamicShared<SmallBatchGemmKernel<kXTiles, kInt4>>(error);
  }
  static int64_t Resident(int64_t shared_bytes, cudaError_t* error) {
    return kernels::ResidentCtasWithShared<SmallBatchGemmKernel<kXTiles, kInt4>>(static_cast<size_t>(shared_bytes),
                                                                                error, kThreads / 32);
  }
};

// f(Bucket<x_tiles, int4>{}) for the bucket of x_tiles and the weights' kind.
template <bool kInt4, typename F>
auto WithBucketOf(int x_tiles, F f) {
  switch (x_tiles) {
    case 2: return f(Bucket<2, kInt4>{});
    case 4: return f(Bucket<4, kInt4>{});
    case 8: return f(Bucket<8, kInt4>{});
    default: return f(Bucket<16, kInt4>{});
  }
}
template <typename F>
auto WithBucket(int x_tiles, bool int4, F f) {
  return int4 ? WithBucketOf<true>(x_tiles, f) : WithBucketOf<false>(x_tiles, f);
}

struct SlicePlan {
  int slice_k = 0, slices = 0;
};

// The k slice as the small-batch GEMM picks it, among those whose shared
// memory fits a CTA (`max_shared` bytes): fewest waves of resident CTAs
// first; within one wave, the largest slice (fewest CTAs, least x re-read)
// whose grid covers every SM, else the most CTAs.
SlicePlan PickSlices(int64_t n, int k, int x_tiles, bool int4, int x_blocks, int64_t max_shared, cudaError_t* error) {
  const int sms = kernels::MultiprocessorCount(error);
  if (sms == 0) return {};
  const int64_t tiles = (n + kTileRows - 1) / kTileRows * x_blocks;  // kSiluMul: n / 64 as well
  SlicePlan best;
  int64_t best_waves = 0, best_ctas = 0;
  for (int slice_k : {512, 256, 128, 64}) {
    if (k % slice_k != 0 || k / slice_k > kReduceMaxSlices) continue;
    const SlicePlan plan{slice_k, k / slice_k};
    const int64_t ctas = tiles * plan.slices;
    const int64_t shared = SharedBytes(slice_k, plan.slices, 8 * x_tiles);
    if (shared > max_shared) continue;
    const int64_t resident = WithBucket(x_tiles, int4, [&](auto bucket) { return bucket.Resident(shared, error); });
    if (*error != cudaSuccess) return {};
    const int64_t waves = (ctas + resident - 1) / resident;
    const bool better = best.slices == 0 || waves < best_waves ||
                        (waves == best_waves && best_ctas < sms && ctas > best_ctas);  // larger slices come first
    if (better) best = plan, best_waves = waves, best_ctas = ctas;
  }
  return best;
}

}  // namespace

bool SmallBatchGemmSupports(int64_t n, int64_t k, SmallBatchEpilogue epilogue) {
  // Some slice of 64 - 512 (PickSlices' choices) must cut k into at most 8:
  // k = 576 or 1,344 has none, and would fail at launch rather than here.
  bool sliceable = false;
  for (const int64_t slice_k : {512, 256, 128, 64})
    sliceable = sliceable || (k % slice_k == 0 && k / slice_k <= kReduceMaxSlices);
  return n >= 1 && (n + kTileRows - 1) / kTileRows <= 65535 && k >= kChunkK && sliceable &&
         ((epilogue != SmallBatchEpilogue::kSiluMul && epilogue != SmallBatchEpilogue::kAddResidualNorm) ||
          n % kTileRows == 0);
}

cudaError_t LaunchSmallBatchGemm(const SmallBatchGemmParams& p, cudaStream_t stream) {
  const int x_stride = p.x_stride > 0 ? p.x_stride : p.k;
  if (p.x == nullptr || p.y == nullptr || p.m < 1 || p.m > kSmallBatchGemmMaxRows ||
      !SmallBatchGemmSupports(p.n, p.k, p.epilogue) || x_stride < p.k || x_stride % 8 != 0 ||
      (p.accumulate && (p.out != LinearOutput::kF32 || p.epilogue != SmallBatchEpilogue::kStore)) ||
      !kernels::Aligned16(p.x))
    return cudaErrorInvalidValue;
  // The weights: bf16 (w) or int4 (awq), exactly one of them.
  const bool int4 = p.awq.packed != nullptr;
  const int group_shift = int4 ? CheckedGroupShift(p.awq) : 0;
  if (int4 ? (p.w != nullptr || group_shift < 0 || p.awq.n != p.n || p.awq.k != p.k)
           : (p.w == nullptr || !kernels::Aligned16(p.w)))
    return cudaErrorInvalidValue;
  if (p.epilogue == SmallBatchEpilogue::kRotaryKv &&
      (p.out != LinearOutput::kF32 || !RotaryKvParamsValid(p.rotary, p.n)))
    return cudaErrorInvalidValue;
  const SmallBatchNormOut& norm_out = p.norm_out;
  if (p.epilogue == SmallBatchEpilogue::kAddResidualNorm &&
      (p.out != LinearOutput::kF32 || p.accumulate || !kernels::Aligned16(p.y) || norm_out.weight == nullptr ||
       norm_out.out == nullptr || norm_out.sumsq == nullptr || !kernels::Aligned16(norm_out.weight) ||
       !kernels::Aligned16(norm_out.out)))
    return cudaErrorInvalidValue;
  const SmallBatchRowNorm& row_norm = p.row_norm;
  if (row_norm.sumsq != nullptr &&
      (row_norm.width < kRowNormPartWidth || row_norm.width % kRowNormPartWidth != 0 || !(row_norm.eps >= 0.0f)))
    return cudaErrorInvalidValue;
  const int x_tiles = XTilesFor(std::min(p.m, kMaxXRows));
  const int x_blocks = (p.m + kMaxXRows - 1) / kMaxXRows;
  cudaError_t error = cudaSuccess;
  const int64_t max_shared = WithBucket(x_tiles, int4, [&](auto bucket) { return bucket.OptIn(&error); });
  if (error != cudaSuccess) return error;
  const SlicePlan plan = PickSlices(p.n, p.k, x_tiles, int4, x_blocks, max_shared, &error);
  if (error != cudaSuccess) return error;
  if (plan.slices == 0) return cudaErrorInvalidValue;  // no slice whose CTA fits an SM
  cudaLaunchAttribute attrs[2];
  attrs[0].id = cudaLaunchAttributeClusterDimension;
  attrs[0].val.clusterDim.x = static_cast<unsigned>(plan.slices);
  attrs[0].val.clusterDim.y = 1;
  attrs[0].val.clusterDim.z = 1;
  attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[1].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(plan.slices), static_cast<unsigned>((p.n + kTileRows - 1) / kTileRows),
                        static_cast<unsigned>(x_blocks));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = static_cast<size_t>(SharedBytes(plan.slice_k, plan.slices, 8 * x_tiles));
  config.stream = stream;
  config.attrs = attrs;
  config.numAttrs = 2;
  CUtensorMap w_map = {}, x_map;  // int4: no weight map (the kernel stages the tile itself)
  if (!int4) error = EncodeBf16TensorMap128B(&w_map, p.w, p.n, p.k, p.k, kBoxRows);
  if (error == cudaSuccess) error = EncodeBf16TensorMap128B(&x_map, p.x, p.m, p.k, x_stride, 8 * x_tiles);
  if (error != cudaSuccess) return error;
  const KernelFn kernel = WithBucket(x_tiles, int4, [](auto bucket) { return decltype(bucket)::kKernel; });
  return cudaLaunchKernelEx(&config, kernel, p, w_map, x_map, plan.slice_k, plan.slices, group_shift);
}

}  // namespace ernie::cuda
