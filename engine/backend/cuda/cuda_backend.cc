// Start-up of the CUDA backend (checks, uploads, allocations) and block
// copies. The forward pass is in cuda_forward.cc.
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend/cpu/elementwise.h"
#include "engine/backend/cuda/cuda_backend_impl.h"
#include "engine/backend/cuda/kernels/copy_blocks.h"
#include "engine/backend/cuda/kernels/awq_decode_linear.h"
#include "engine/backend/cuda/kernels/cluster_decode_linear.h"
#include "engine/backend/cuda/kernels/decode_linear.h"
#include "engine/backend/cuda/kernels/grouped_awq_gemv.h"
#include "engine/backend/cuda/kernels/moe_routing.h"
#include "engine/backend/cuda/kernels/mma_attention.h"
#include "engine/backend/cuda/kernels/paged_attention.h"
#include "engine/backend/cuda/kernels/small_batch_gemm.h"
#include "engine/util/status_macros.h"

namespace ernie {

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the error: "no device" is an answer here
    return 0;
  }
  return count;
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CreateCudaBackend(const LoadedModel& model,
                                                                const CudaBackendOptions& options) {
  return cuda::CudaBackendImpl::Create(model, options);
}

namespace cuda {

namespace {

// CudaBackendOptions::fused_decode_max_rows: `asked`, or where the fused
// decode kernels stop paying for this model. Greedy step ms on the H200,
// fused against unfused: 0.3b bf16 0.460 / 0.822 at 1 token, 0.618 / 0.831
// at 2, 0.833 / 0.832 at 3, 1.766 / 0.701 at 8; 0.3b AWQ int4 0.471 / 0.477
// at 1, 0.561 / 0.493 at 2, 1.168 / 0.600 at 8 (v19 run7); 21B-A3B AWQ
// 1.698 / 1.692 at 1, 2.262 / 2.142 at 2, 3.126 / 2.802 at 4; 21B-A3B bf16
// 2.528 / 2.521 at 1, 3.737 / 3.571 at 2, 5.911 / 5.203 at 4 (run8). Since
// the small-batch GEMM (v20 run4) the 0.3b bf16's unfused step at 2 tokens
// is 0.541 against the fused 0.595 ms (at 1 token 0.503 against 0.456), so
// every model now fuses single-token steps only.
int32_t FusedDecodeMaxRows(int asked) { return asked >= 0 ? asked : 1; }

// An option that is `asked`, or, at -1, by model: `dense` on dense models,
// `moe` on mixture-of-experts ones. Why each option's values, where it is set.
int32_t ByModel(int asked, const ModelConfig& c, int32_t dense, int32_t moe) {
  if (asked >= 0) return asked;
  return c.architecture == Architecture::kErnie45Moe ? moe : dense;
}

absl::Status CheckShapes(const ModelConfig& c, const CudaBackendOptions& o) {
  if (c.architecture == Architecture::kErnie45Moe) {
    const MoeConfig& m = c.moe;
    // The int4 kernels step along k in blocks of 64 (kernels/awq_gemm.h):
    // H is the gate/up input, I the down input.
    if (c.awq.has_value() && (c.hidden_size % 64 != 0 || m.intermediate_size % 64 != 0))
      return absl::InvalidArgumentError(absl::StrCat("the CUDA AWQ expert kernels need hidden_size and ",
                                                     "moe_intermediate_size divisible by 64; the model has ",
                                                     c.hidden_size, " and ", m.intermediate_size,
                                                     " (the CPU backend runs it: --backend cpu)"));
    if (c.use_bias) return absl::InvalidArgumentError("the CUDA backend runs MoE models without biases (use_bias false)");
    if (m.num_experts + m.num_shared_experts > kMoeMaxExperts || m.top_k + m.num_shared_experts > kMoeMaxTopK)
      return absl::InvalidArgumentError(absl::StrCat("the CUDA MoE kernels take at most ", kMoeMaxExperts,
                                                     " experts and ", kMoeMaxTopK, " choices a token (shared experts "
                                                     "included); the model has ", m.num_experts, " + ",
                                                     m.num_shared_experts, " and ", m.top_k, " + ",
                                                     m.num_shared_experts));
    if (m.intermediate_size % 8 != 0 || c.hidden_size % 8 != 0)
      return absl::InvalidArgumentError(absl::StrCat("the CUDA MoE kernels need hidden_size and moe_intermediate_size ",
                                                     "divisible by 8; the model has ", c.hidden_size, " and ",
                                                     m.intermediate_size));
  }
  if (c.num_layers < 1) return absl::InvalidArgumentError("the model has no layers");
  if (!PagedAttentionSupportsHeadDim(static_cast<int32_t>(c.head_dim)))
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported head_dim ", c.head_dim, " (the CUDA kernels cover 8, 16, 24, 32, 64 and 128)"));
  if (c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0 ||
      c.num_heads / c.num_kv_heads > kAttentionRowsPerCta)
    return absl::InvalidArgumentError(absl::StrCat("unsupported attention heads: ", c.num_heads, " query heads over ",
                                                   c.num_kv_heads, " KV heads (at most ", kAttentionRowsPerCta,
                                                   " query heads per KV head)"));
  if (o.block_size <= 0) return absl::InvalidArgumentError("block_size must be positive");
  if (!(o.kv_free_memory_fraction >= 0.0 && o.kv_free_memory_fraction <= 1.0))
    return absl::InvalidArgumentError(absl::StrCat("kv_free_memory_fraction must be in [0, 1], got ",
                                                   o.kv_free_memory_fraction));
  if (o.num_blocks < 0 || (o.num_blocks == 0 && o.kv_free_memory_fraction == 0.0))
    return absl::InvalidArgumentError("num_blocks must be positive (or sized by kv_free_memory_fraction)");
  if (o.max_sample_rows <= 0) return absl::InvalidArgumentError("max_sample_rows must be positive");
  if (o.num_blocks * o.block_size > (int64_t{1} << 31) - 1)
    return absl::InvalidArgumentError("num_blocks * block_size must fit in 31 bits (cache slots are int32)");
  if (o.max_tokens_per_step <= 0 || o.max_tokens_per_step > (1 << 24))
    return absl::InvalidArgumentError("max_tokens_per_step must be in [1, 2^24]");
  if (o.max_logit_rows <= 0) return absl::InvalidArgumentError("max_logit_rows must be positive");
  if (o.max_blocks_per_step < 0) return absl::InvalidArgumentError("max_blocks_per_step must not be negative");
  // The attention kernels address a block's keys of all heads with 32-bit offsets.
  if (o.block_size * c.num_kv_heads * c.head_dim >= (int64_t{1} << 31))
    return absl::InvalidArgumentError(absl::StrCat("block_size x num_kv_heads x head_dim must be below 2^31, got ",
                                                   o.block_size, " x ", c.num_kv_heads, " x ", c.head_dim));
  if (o.fused_decode_max_rows < -1 || o.fused_decode_max_rows > kDecodeLinearMaxRows)
    return absl::InvalidArgumentError(absl::StrCat("fused_decode_max_rows must be -1 (by model) or in [0, ",
                                                   kDecodeLinearMaxRows, "], got ", o.fused_decode_max_rows));
  if (o.small_batch_gemm_max_rows < 0 || o.small_batch_gemm_max_rows > kSmallBatchGemmMaxRows)
    return absl::InvalidArgumentError(absl::StrCat("small_batch_gemm_max_rows must be in [0, ", kSmallBatchGemmMaxRows,
                                                   "], got ", o.small_batch_gemm_max_rows));
  if (o.small_batch_lm_head_max_rows < -1 || o.small_batch_lm_head_max_rows > kSmallBatchGemmMaxRows)
    return absl::InvalidArgumentError(absl::StrCat("small_batch_lm_head_max_rows must be -1 (by model) or in [0, ",
                                                   kSmallBatchGemmMaxRows, "], got ", o.small_batch_lm_head_max_rows));
  if (o.awq_tiled_gemm_max_rows < 0 || o.awq_tiled_gemm_max_rows > 4096)
    return absl::InvalidArgumentError(
        absl::StrCat("awq_tiled_gemm_max_rows must be in [0, 4096], got ", o.awq_tiled_gemm_max_rows));
  if (o.awq_small_batch_gemm_max_rows < -1 || o.awq_small_batch_gemm_max_rows > kSmallBatchGemmMaxRows ||
      o.awq_small_batch_gemm_min_rows < 1 || o.awq_small_batch_gemm_min_rows > kSmallBatchGemmMaxRows)
    return absl::InvalidArgumentError(absl::StrCat("awq_small_batch_gemm_max_rows must be -1 (auto) or in [0, ",
                                                   kSmallBatchGemmMaxRows, "] and awq_small_batch_gemm_min_rows in [1, ",
                                                   kSmallBatchGemmMaxRows, "], got ", o.awq_small_batch_gemm_max_rows,
                                                   " and ", o.awq_small_batch_gemm_min_rows));
  if (o.awq_tiled_gemm_tile_rows != 16 && o.awq_tiled_gemm_tile_rows != 32 && o.awq_tiled_gemm_tile_rows != 64)
    return absl::InvalidArgumentError(
        absl::StrCat("awq_tiled_gemm_tile_rows must be 16, 32 or 64, got ", o.awq_tiled_gemm_tile_rows));
  if (o.unsplit_attention_max_context < 0 || o.unsplit_attention_min_pairs < 1)
    return absl::InvalidArgumentError(absl::StrCat(
        "unsplit_attention_max_context must not be negative and unsplit_attention_min_pairs must be positive, got ",
        o.unsplit_attention_max_context, " and ", o.unsplit_attention_min_pairs));
  if (o.wide_decode_attention_max_pairs < -1)
    return absl::InvalidArgumentError(absl::StrCat(
        "wide_decode_attention_max_pairs must be -1 (by model) or at least 0, got ", o.wide_decode_attention_max_pairs));
  if (o.max_attention_splits < 1 || o.max_attention_splits > kMaxAttentionSplits)
    return absl::InvalidArgumentError(
        absl::StrCat("max_attention_splits must be in [1, ", kMaxAttentionSplits, "], got ", o.max_attention_splits));
  if (o.moe_chunk_tokens < 1 || o.moe_chunk_tokens > (1 << 16))
    return absl::InvalidArgumentError(absl::StrCat("moe_chunk_tokens must be in [1, 65536], got ", o.moe_chunk_tokens));
  if (o.moe_max_tile_rows != 0 && o.moe_max_tile_rows != 8 && o.moe_max_tile_rows != 16 && o.moe_max_tile_rows != 32 &&
      o.moe_max_tile_rows != 64)
    return absl::InvalidArgumentError(
        absl::StrCat("moe_max_tile_rows must be 0, 8, 16, 32 or 64, got ", o.moe_max_tile_rows));
  if (o.moe_grouped_gemm_min_rows != -1 && o.moe_grouped_gemm_min_rows != 0 && o.moe_grouped_gemm_min_rows != 8 &&
      o.moe_grouped_gemm_min_rows != 16 && o.moe_grouped_gemm_min_rows != 32 && o.moe_grouped_gemm_min_rows != 64)
    return absl::InvalidArgumentError(absl::StrCat("moe_grouped_gemm_min_rows must be -1, 0, 8, 16, 32 or 64, got ",
                                                   o.moe_grouped_gemm_min_rows));
  if (o.moe_awq_gemv_k_slices != 0 && o.moe_awq_gemv_k_slices != 1 && o.moe_awq_gemv_k_slices != 2 &&
      o.moe_awq_gemv_k_slices != 4 && o.moe_awq_gemv_k_slices != 8)
    return absl::InvalidArgumentError(
        absl::StrCat("moe_awq_gemv_k_slices must be 0, 1, 2, 4 or 8, got ", o.moe_awq_gemv_k_slices));
  const int cta_warps = o.moe_awq_gemv_cta_warps, k_slices = o.moe_awq_gemv_k_slices;
  if (cta_warps < 0 || cta_warps > kGroupedAwqGemvMaxCtaWarps ||
      (cta_warps > 0 && k_slices > 0 && cta_warps % k_slices != 0))
    return absl::InvalidArgumentError(absl::StrCat("moe_awq_gemv_cta_warps must be 0 - ", kGroupedAwqGemvMaxCtaWarps,
                                                   " and a multiple of moe_awq_gemv_k_slices, got ", cta_warps));
  const int record_cluster = o.moe_router_record_cluster;
  if (record_cluster != -1 && (record_cluster < 1 || record_cluster > kMoeRouterRecordClusterMax ||
                               (record_cluster & (record_cluster - 1)) != 0))
    return absl::InvalidArgumentError(absl::StrCat("moe_router_record_cluster must be -1 or a power of two up to ",
                                                   kMoeRouterRecordClusterMax, ", got ", record_cluster));
  if (o.stream_kv_min_items < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("stream_kv_min_items must not be negative, got ", o.stream_kv_min_items));
  if (o.kv_prefetch_max_seqs < 0)
    return absl::InvalidArgumentError(absl::StrCat("kv_prefetch_max_seqs must not be negative, got ",
                                                   o.kv_prefetch_max_seqs));
  if (o.moe_early_shared_experts < 0 || o.moe_early_shared_experts > 3)
    return absl::InvalidArgumentError(
        absl::StrCat("moe_early_shared_experts must be 0 - 3, got ", o.moe_early_shared_experts));
  if (o.moe_shared_gemm_min_tokens < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("moe_shared_gemm_min_tokens must be positive, got ", o.moe_shared_gemm_min_tokens));
  if (o.graph_max_tokens < 0 || o.max_graphs < 0)
    return absl::InvalidArgumentError("graph_max_tokens and max_graphs must not be negative");
  return absl::OkStatus();
}

absl::Status SelectDevice(int device) {
  const int count = CudaDeviceCount();
  if (count == 0) return absl::FailedPreconditionError("no CUDA device is visible to this process");
  if (device < 0 || device >= count)
    return absl::InvalidArgumentError(absl::StrCat("CUDA device ", device, " requested; ", count, " visible"));
  ERNIE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device), absl::StrCat("cudaSetDevice(", device, ")"));
  cudaDeviceProp prop;
  ERNIE_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  if (prop.major != 9)
    return absl::FailedPreconditionError(absl::StrCat("CUDA device ", device, " (", prop.name,
                                                      ") is compute capability ", prop.major, ".", prop.minor,
                                                      "; this build carries sm_90a (Hopper) code only"));
  return absl::OkStatus();
}

// The o_proj's record cluster size (CudaBackendOptions::moe_router_record_cluster). Sizes above the portable 8 need
// a device that runs them: one asked for by name and not runnable is a clear error at start, not at a step; the
// default (-1) takes 16 where it runs and 8 elsewhere.
absl::StatusOr<int32_t> ChooseRouterRecordCluster(const CudaBackendOptions& options, bool awq, int32_t o_proj_k) {
  const int32_t asked = options.moe_router_record_cluster;
  const int32_t wanted = asked == -1 ? kMoeRouterRecordClusterMax : asked;
  // Only the AWQ o_proj of the folded routing writes records; elsewhere the size is unused.
  if (!options.moe_fold_routing || !awq) return asked == -1 ? kMoeRouterRecordClusterPortable : asked;
  if (wanted <= kMoeRouterRecordClusterPortable) return wanted;
  cudaError_t error = cudaSuccess;
  const bool runs = AwqDecodeLinearRunsRecordClusters(wanted, o_proj_k, &error);
  if (asked == -1) {
    (void)cudaGetLastError();  // a refused query leaves its error as the last one; the fallback needs none
    return runs ? wanted : kMoeRouterRecordClusterPortable;
  }
  ERNIE_CUDA_RETURN_IF_ERROR(error, "cudaOccupancyMaxActiveClusters (the o_proj's record clusters)");
  if (!runs)
    return absl::InvalidArgumentError(
        absl::StrCat("moe_router_record_cluster ", asked, ": this device cannot run thread-block clusters that large"));
  return wanted;
}

template <typename T>
absl::StatusOr<DeviceBuffer<T>> Alloc(int64_t count, const char* what) {
  return DeviceBuffer<T>::Allocate(static_cast<size_t>(count), what);
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackendImpl::Create(const LoadedModel& model,
                                                                     const CudaBackendOptions& options) {
  const ModelConfig& c = model.config;
  ERNIE_RETURN_IF_ERROR(CheckShapes(c, options));
  ERNIE_RETURN_IF_ERROR(SelectDevice(options.device));

  cudaStream_t raw_stream = nullptr;
  ERNIE_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&raw_stream, cudaStreamNonBlocking), "cudaStreamCreate");
  Stream stream(raw_stream);
  ERNIE_ASSIGN_OR_RETURN(Gemm gemm, Gemm::Create(stream.get()));
  std::unique_ptr<CudaBackendImpl> b(new CudaBackendImpl(c, std::move(stream), std::move(gemm)));

  b->kv_shape_ = KvCacheShape{.num_layers = c.num_layers,
                              .num_kv_heads = c.num_kv_heads,
                              .head_dim = c.head_dim,
                              .block_size = options.block_size,
                              .num_blocks = options.num_blocks,
                              .bytes_per_element = 2};
  b->device_ = options.device;
  b->graph_max_tokens_ = options.graph_max_tokens;
  b->graphs_.set_max_graphs(options.max_graphs);
  b->max_tokens_ = options.max_tokens_per_step;
  b->logit_rows_per_pass_ = std::min(options.max_logit_rows, options.max_tokens_per_step);
  b->attn_scale_ = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  b->max_attention_splits_ = options.max_attention_splits;
  b->unsplit_attention_max_context_ = options.unsplit_attention_max_context;
  b->kv_prefetch_max_seqs_ = options.kv_prefetch_max_seqs;
  b->stream_kv_min_items_ = options.stream_kv_min_items;
  b->unsplit_attention_min_pairs_ = options.unsplit_attention_min_pairs;
  // By model: greedy step ms on two H100s (NOTES.md v35 run4 - run5), the
  // wide kernel against unsplit four-warp CTAs and against split: 21B-A3B AWQ
  // at batch 1 1.722 - 1.738 / 1.736 - 1.770 / 1.747 - 1.754 (5 rounds), at 2
  // 2.296 / 2.304 / 2.308; 0.3b bf16 at 1 0.502 - 0.505 / 0.480 - 0.482 /
  // 0.498 - 0.507, at 2 0.546 - 0.549 / 0.529 - 0.531 / 0.547 - 0.553. So
  // mixture-of-experts models (4 KV heads; 8 pairs: batches 1 - 2) take it
  // and dense ones do not.
  b->wide_decode_attention_max_pairs_ = ByModel(options.wide_decode_attention_max_pairs, c, 0, 8);
  b->decode_swap_ab_ = options.decode_attention_swap_ab;
  b->mma_attention_ = options.tensor_core_attention && MmaAttentionSupportsHeadDim(static_cast<int32_t>(c.head_dim));
  b->decode_single_wave_ = options.decode_linear_single_wave;
  b->small_batch_gemm_max_rows_ = options.small_batch_gemm_max_rows;
  b->awq_tiled_gemm_max_rows_ = options.awq_tiled_gemm_max_rows;
  // By model: the figures are beside the option.
  b->small_batch_lm_head_max_rows_ = ByModel(options.small_batch_lm_head_max_rows, c, 32, 0);
  if (options.lm_head_gemm_tuning) {
    ERNIE_ASSIGN_OR_RETURN(TunedGemm lm_head, TunedGemm::Create(b->stream_.get(), c.vocab_size, c.hidden_size));
    b->lm_head_gemm_.emplace(std::move(lm_head));
  }
  b->awq_tiled_gemm_tile_rows_ = options.awq_tiled_gemm_tile_rows;
  b->awq_small_batch_min_rows_ = options.awq_small_batch_gemm_min_rows;
  // Auto: dense models only (on the 21B-A3B it was slower at 16 and 64 rows).
  b->awq_small_batch_max_rows_ = ByModel(options.awq_small_batch_gemm_max_rows, c, 64, 0);
  {
    const int64_t h = c.hidden_size, qkv = c.q_size() + 2 * c.kv_size(), i = c.intermediate_size;
    // AWQ models: only where their linears take the int4 small-batch GEMM (NormEpiloguesFor).
    b->norm_epilogue_shapes_ = options.small_batch_norm_epilogues && c.architecture == Architecture::kErnie45Dense &&
                               SmallBatchGemmSupports(qkv, h, SmallBatchEpilogue::kRotaryKv) &&
                               SmallBatchGemmSupports(h, c.q_size(), SmallBatchEpilogue::kAddResidualNorm) &&
                               SmallBatchGemmSupports(2 * i, h, SmallBatchEpilogue::kSiluMul) &&
                               SmallBatchGemmSupports(h, i, SmallBatchEpilogue::kAddResidualNorm);
  }
  // The fused decode kernels hold their input rows in shared memory: steps
  // of up to decode_max_rows_ tokens take them (fewer than 8 when a layer is
  // as wide as the 21B-A3B's dense MLP, 12288).
  const auto decode_max_k = static_cast<int32_t>(std::max({c.hidden_size, c.q_size(), c.intermediate_size}));
  cudaError_t smem_error = cudaSuccess;
  const int32_t fused_rows = FusedDecodeMaxRows(options.fused_decode_max_rows);
  b->decode_max_rows_ = fused_rows > 0 ? std::min(DecodeLinearMaxRows(decode_max_k, &smem_error), fused_rows) : 0;
  ERNIE_CUDA_RETURN_IF_ERROR(smem_error, "cudaDeviceGetAttribute(shared memory per block)");
  ERNIE_CUDA_RETURN_IF_ERROR(PrepareDecodeLinear(decode_max_k, b->decode_max_rows_), "decode kernels' shared memory");
  if (c.awq.has_value()) {
    // (Its SiLU epilogue pairs gate and up tiles of 16 rows: the intermediate
    // size, down_proj's k, is a multiple of the group size, at least 32.)
    ERNIE_CUDA_RETURN_IF_ERROR(PrepareAwqDecodeLinear(decode_max_k, b->decode_max_rows_),
                               "AWQ decode kernels' shared memory");
  }
  // Steps above decode_max_rows_, up to 64 tokens: the cluster kernel, when
  // asked, for dense bf16 models whose four linears it takes (qkv + rotary,
  // o_proj, gate/up + SiLU, down).
  const bool cluster_shapes =
      ClusterDecodeLinearSupports(static_cast<int32_t>(c.q_size() + 2 * c.kv_size()),
                                  static_cast<int32_t>(c.hidden_size), DecodeEpilogue::kRotaryKv) &&
      ClusterDecodeLinearSupports(static_cast<int32_t>(c.hidden_size), static_cast<int32_t>(c.q_size()),
                                  DecodeEpilogue::kAddResidual) &&
      ClusterDecodeLinearSupports(static_cast<int32_t>(2 * c.intermediate_size), static_cast<int32_t>(c.hidden_size),
                                  DecodeEpilogue::kSiluMul) &&
      ClusterDecodeLinearSupports(static_cast<int32_t>(c.hidden_size), static_cast<int32_t>(c.intermediate_size),
                                  DecodeEpilogue::kAddResidual);
  if (fused_rows > 0 && !c.awq.has_value() && c.architecture == Architecture::kErnie45Dense &&
      cluster_shapes && options.cluster_decode_max_rows > b->decode_max_rows_) {
    b->cluster_decode_max_rows_ = std::min(options.cluster_decode_max_rows, kClusterDecodeLinearMaxRows);
    ERNIE_CUDA_RETURN_IF_ERROR(PrepareClusterDecodeLinear(), "cluster decode kernels' shared memory");
  }
  ERNIE_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&b->num_sms_, cudaDevAttrMultiProcessorCount, options.device),
                             "cudaDeviceGetAttribute(multiprocessor count)");

  if (model.dummy_weights) {
    ERNIE_ASSIGN_OR_RETURN(b->weights_, MakeDummyWeights(c, /*seed=*/0));
  } else {
    ERNIE_ASSIGN_OR_RETURN(b->weights_, UploadWeights(model.weights));
  }

  const int64_t t = options.max_tokens_per_step;
  Workspace& ws = b->ws_;
  ERNIE_ASSIGN_OR_RETURN(ws.x, Alloc<float>(t * c.hidden_size, "residual stream"));
  ERNIE_ASSIGN_OR_RETURN(ws.h, Alloc<uint16_t>(t * c.hidden_size, "normed activations"));
  ERNIE_ASSIGN_OR_RETURN(ws.qkv, Alloc<float>(t * (c.q_size() + 2 * c.kv_size()), "qkv activations"));
  ERNIE_ASSIGN_OR_RETURN(ws.attn, Alloc<uint16_t>(t * c.q_size(), "attention output"));
  ERNIE_ASSIGN_OR_RETURN(ws.proj, Alloc<float>(t * c.hidden_size, "projection output"));
  if (b->norm_epilogue_shapes_) {
    ERNIE_ASSIGN_OR_RETURN(ws.norm_sumsq, Alloc<float>(RowNormSumsqFloats(c.hidden_size), "norm partial sums"));
  }
  // MoE models: one MoeBlock pass takes `chunk` tokens of K = top_k + shared
  // choices each, over E + shared stacked experts; its slots are sized for
  // the largest tile the grouped kernels take.
  const bool moe = c.architecture == Architecture::kErnie45Moe;
  const MoeConfig& m = c.moe;
  const int64_t chunk = std::min<int64_t>(t, options.moe_chunk_tokens);
  const int64_t choices = m.top_k + m.num_shared_experts, stacked = m.num_experts + m.num_shared_experts;
  // ws.gate_up and ws.act also hold the shared experts' dense MLP
  // (SharedExpertsByGemm: S x I wide, float32 gate|up). A dense model's
  // gate|up is bf16 (MlpBlock): [t, 2I] bf16 is t x I floats, which also
  // holds the decode pass's float32 SiLU output (at most t rows of I).
  const int64_t mlp_width = std::max(c.intermediate_size, moe ? m.num_shared_experts * m.intermediate_size : 0);
  const int64_t gate_up_floats = moe ? t * 2 * mlp_width : t * mlp_width;
  ERNIE_ASSIGN_OR_RETURN(ws.gate_up, Alloc<float>(gate_up_floats, "gate/up activations"));
  ERNIE_ASSIGN_OR_RETURN(ws.act, Alloc<uint16_t>(t * mlp_width, "MLP activations"));
  if (moe) {
    const int64_t slots = MoeSlotCapacity(chunk * choices, stacked, kMoeMaxTileRows);
    b->moe_chunk_tokens_ = static_cast<int32_t>(chunk);
    const bool awq_experts = std::any_of(b->weights_.layers.begin(), b->weights_.layers.end(),
                                         [](const DeviceLayerWeights& l) { return l.is_moe && !l.moe.awq.empty(); });
    b->moe_max_tile_rows_ = options.moe_max_tile_rows != 0 ? options.moe_max_tile_rows : awq_experts ? 32 : 64;
    b->moe_grouped_gemm_min_rows_ = options.moe_grouped_gemm_min_rows;
    b->moe_awq_gemv_k_slices_ = options.moe_awq_gemv_k_slices;
    b->moe_awq_gemv_cta_warps_ = options.moe_awq_gemv_cta_warps;
    b->moe_awq_gemv_lean_ = options.moe_awq_gemv_lean;
    b->moe_route_cluster_ = options.moe_route_cluster;
    b->moe_early_shared_experts_ = options.moe_early_shared_experts;
    b->moe_shared_gemm_min_tokens_ = options.moe_shared_gemm_min_tokens;
    b->moe_fold_routing_ = options.moe_fold_routing;
    b->moe_fold_prefetch_shared_ = options.moe_fold_prefetch_shared;
    b->moe_fold_prefetch_down_ = options.moe_fold_prefetch_down;
    ERNIE_ASSIGN_OR_RETURN(b->moe_router_record_cluster_,
                           ChooseRouterRecordCluster(options, c.awq.has_value(), static_cast<int32_t>(c.q_size())));
    if (options.moe_fold_routing) {
      ERNIE_ASSIGN_OR_RETURN(ws.moe_router_records,
                             Alloc<float>((c.hidden_size + 15) / 16 * MoeRouterRecordStride(
                                                                          static_cast<int32_t>(m.num_experts)),
                                          "MoE router records"));
      ERNIE_ASSIGN_OR_RETURN(ws.moe_fold_ready, Alloc<uint32_t>(1, "MoE folded routing's tile flag"));
      ERNIE_RETURN_IF_ERROR(CudaStatus(cudaMemset(ws.moe_fold_ready.data(), 0, sizeof(uint32_t)),
                                       "zeroing the MoE folded routing's tile flag"));
    }
    ERNIE_ASSIGN_OR_RETURN(ws.moe_logits, Alloc<float>(chunk * m.num_experts, "MoE router logits"));
    ERNIE_ASSIGN_OR_RETURN(ws.moe_topk_ids, Alloc<int32_t>(chunk * choices, "MoE chosen experts"));
    ERNIE_ASSIGN_OR_RETURN(ws.moe_topk_weights, Alloc<float>(chunk * choices, "MoE expert weights"));
    ERNIE_ASSIGN_OR_RETURN(ws.moe_slot_token, Alloc<int32_t>(slots, "MoE slot tokens"));
    ERNIE_ASSIGN_OR_RETURN(ws.moe_slot_of, Alloc<int32_t>(chunk * choices, "MoE assignment slots"));
    ERNIE_ASSIGN_OR_RETURN(ws.moe_tile_expert, Alloc<int32_t>(slots / 8 + 1, "MoE tile experts"));
    ERNIE_ASSIGN_OR_RETURN(ws.moe_num_tiles, Alloc<int32_t>(1, "MoE tile count"));
    ERNIE_ASSIGN_OR_RETURN(ws.moe_route_arrivals, Alloc<uint32_t>(1, "MoE routing arrivals"));
    ERNIE_RETURN_IF_ERROR(CudaStatus(cudaMemset(ws.moe_route_arrivals.data(), 0, sizeof(uint32_t)),
                                     "zeroing the MoE routing arrival count"));
    ERNIE_ASSIGN_OR_RETURN(ws.moe_shared_ready, Alloc<uint32_t>(1, "MoE shared experts' ready count"));
    ERNIE_RETURN_IF_ERROR(CudaStatus(cudaMemset(ws.moe_shared_ready.data(), 0, sizeof(uint32_t)),
                                     "zeroing the MoE shared experts' ready count"));
    ERNIE_ASSIGN_OR_RETURN(ws.moe_act, Alloc<uint16_t>(slots * m.intermediate_size, "MoE expert activations"));
    ERNIE_ASSIGN_OR_RETURN(ws.moe_expert_out, Alloc<float>(slots * c.hidden_size, "MoE expert outputs"));
  }
  const int64_t partial_rows = PagedAttentionPartialCtas(b->num_sms_) * b->AttentionRowsPerItem();
  ERNIE_ASSIGN_OR_RETURN(ws.attn_partial_out, Alloc<float>(partial_rows * c.head_dim, "split-KV partial outputs"));
  ERNIE_ASSIGN_OR_RETURN(ws.attn_partial_ml, Alloc<float>(partial_rows * 2, "split-KV partial max/sum"));
  ERNIE_ASSIGN_OR_RETURN(ws.awq_weights, Alloc<uint16_t>(b->weights_.max_awq_elements, "AWQ dequantise workspace"));
  ERNIE_ASSIGN_OR_RETURN(ws.logits, Alloc<float>(b->logit_rows_per_pass_ * c.vocab_size, "logits"));
  ERNIE_ASSIGN_OR_RETURN(ws.inv_freq, Alloc<float>(c.head_dim / 2, "rotary frequencies"));
  ERNIE_ASSIGN_OR_RETURN(ws.copies, Alloc<int32_t>(3 * kMaxCopiesPerLaunch, "block copies"));
  ERNIE_ASSIGN_OR_RETURN(ws.copies_staging,
                         PinnedBuffer<int32_t>::Allocate(3 * kMaxCopiesPerLaunch, "block copy staging"));
  std::vector<float> inv_freq(static_cast<size_t>(c.head_dim / 2));
  cpu::RotaryInverseFrequencies(c.rope_theta, c.head_dim, inv_freq.data());  // the reference's own float32 values
  ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpy(ws.inv_freq.data(), inv_freq.data(), inv_freq.size() * sizeof(float),
                                        cudaMemcpyHostToDevice),
                             "cudaMemcpy of rotary frequencies");

  ERNIE_ASSIGN_OR_RETURN(b->sampler_, DeviceSampler::Create(c.vocab_size, options.max_sample_rows, options.fast_greedy_sampling));
  b->overlap_steps_ = options.overlap_steps;
  for (Event& e : b->launch_done_) {
    ERNIE_ASSIGN_OR_RETURN(e, Event::Create());
  }

  // Block tables: a sequence spans at most the pool, and at most the model's context.
  const int64_t context_blocks = c.max_position_embeddings > 0
                                     ? (c.max_position_embeddings + options.block_size - 1) / options.block_size
                                     : options.num_blocks;
  int64_t table_entries = options.max_blocks_per_step;
  if (table_entries == 0) {
    int64_t per_seq = options.num_blocks > 0 ? std::min(options.num_blocks, context_blocks) : context_blocks;
    if (per_seq <= 0)
      return absl::InvalidArgumentError("max_blocks_per_step must be set when the model has no max_position_embeddings");
    table_entries = t * per_seq;
  }
  ERNIE_ASSIGN_OR_RETURN(b->inputs_, StepInputs::Create(t, table_entries));

  // The KV pool last, so that a fraction of free memory means what is left.
  if (options.kv_free_memory_fraction > 0.0) {
    size_t free_bytes = 0, total_bytes = 0;
    ERNIE_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    // cuBLAS takes its scratch lazily (counted as 32 MiB of workspace below).
    const int64_t usable = std::max<int64_t>(0, static_cast<int64_t>(free_bytes) - (int64_t{32} << 20));
    const auto fraction_blocks = static_cast<int64_t>(static_cast<double>(usable) * options.kv_free_memory_fraction) /
                                 b->kv_shape_.bytes_per_block();
    const int64_t blocks = options.num_blocks > 0 ? std::min(options.num_blocks, fraction_blocks) : fraction_blocks;
    if (blocks < 1)
      return absl::ResourceExhaustedError(absl::StrCat(
          "CUDA device ", options.device, ": ", free_bytes >> 20, " MiB free after weights (",
          b->weights_.bytes() >> 20, " MiB) and workspaces; ", options.kv_free_memory_fraction,
          " of it holds no KV block of ", b->kv_shape_.bytes_per_block(), " bytes"));
    b->kv_shape_.num_blocks = std::min<int64_t>(blocks, ((int64_t{1} << 31) - 1) / options.block_size);
  }
  ERNIE_ASSIGN_OR_RETURN(b->kv_cache_, Alloc<uint16_t>(b->kv_shape_.total_bytes() / 2, "KV cache"));
  ERNIE_RETURN_IF_ERROR(b->SetUpPersistentDecode(options));  // needs the cache's address
  // After the KV pool, whose size from free memory left room for the scratch
  // cuBLAS takes at its first GEMM, which this is.
  ERNIE_RETURN_IF_ERROR(b->TuneLmHead());
  b->memory_ = CudaMemoryBreakdown{.weights = b->weights_.bytes(),
                                   .kv_cache = static_cast<int64_t>(b->kv_cache_.bytes()),
                                   .workspace = ws.bytes() + (10 * t + table_entries) * 4 + b->sampler_.bytes() +
                                                (int64_t{32} << 20)};
  return std::unique_ptr<CudaBackend>(std::move(b));
}

CudaBackendImpl::~CudaBackendImpl() { cudaStreamSynchronize(stream_.get()); }

PagedKvView CudaBackendImpl::LayerCache(int64_t layer) const {
  const KvCacheShape& s = kv_shape_;
  const int64_t plane = s.num_blocks * s.num_kv_heads * s.block_size * s.head_dim;
  auto* base = reinterpret_cast<__nv_bfloat16*>(kv_cache_.data());
  return PagedKvView{.k = base + (layer * 2) * plane,
                     .v = base + (layer * 2 + 1) * plane,
                     .num_blocks = static_cast<int32_t>(s.num_blocks),
                     .num_kv_heads = static_cast<int32_t>(s.num_kv_heads),
                     .block_size = static_cast<int32_t>(s.block_size),
                     .head_dim = static_cast<int32_t>(s.head_dim)};
}

absl::Status CudaBackendImpl::CopyBlocksChunk(std::span<const BlockCopyOp> copies) {
  int32_t* host = ws_.copies_staging.data();
  for (size_t i = 0; i < copies.size(); ++i) {
    host[3 * i] = copies[i].src_block;
    host[3 * i + 1] = copies[i].dst_block;
    host[3 * i + 2] = copies[i].num_tokens;
  }
  ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(ws_.copies.data(), host, copies.size() * 3 * sizeof(int32_t),
                                             cudaMemcpyHostToDevice, stream_.get()),
                             "cudaMemcpyAsync of block copies");
  const KvCacheShape& s = kv_shape_;
  ERNIE_CUDA_RETURN_IF_ERROR(
      LaunchCopyBlocks({.cache = reinterpret_cast<__nv_bfloat16*>(kv_cache_.data()),
                        .copies = ws_.copies.data(),
                        .num_copies = static_cast<int32_t>(copies.size()),
                        .num_layers = static_cast<int32_t>(s.num_layers),
                        .num_blocks = static_cast<int32_t>(s.num_blocks),
                        .num_kv_heads = static_cast<int32_t>(s.num_kv_heads),
                        .block_size = static_cast<int32_t>(s.block_size),
                        .head_dim = static_cast<int32_t>(s.head_dim)},
                       stream_.get()),
      "copy-blocks kernel launch");
  // The staging buffer is reused by the next chunk.
  return CudaStatus(cudaStreamSynchronize(stream_.get()), "block copies");
}

// Copies run in order, one launch per kMaxCopiesPerLaunch; within a launch
// the copies run concurrently, so a block must not be both a destination and
// a source of one call (forks copy shared blocks into fresh ones).
absl::Status CudaBackendImpl::CopyBlocks(std::span<const BlockCopyOp> copies) {
  ERNIE_RETURN_IF_ERROR(ValidateBlockCopies(copies, kv_shape_));
  ERNIE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_), "cudaSetDevice");  // the current device is per thread
  for (size_t begin = 0; begin < copies.size(); begin += kMaxCopiesPerLaunch) {
    const size_t n = std::min<size_t>(kMaxCopiesPerLaunch, copies.size() - begin);
    ERNIE_RETURN_IF_ERROR(CopyBlocksChunk(copies.subspan(begin, n)));
  }
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace ernie
