// ForwardAndSample: the forward pass of cuda_forward.cc, then per lm_head
// pass the device sampler over the rows it can sample, and a copy to the
// host of only the fallback rows' logits (bias, penalties, bans).
#include <vector>

#include "engine/backend/cuda/cuda_backend_impl.h"
#include "engine/util/status_macros.h"

namespace ernie::cuda {

absl::Status CudaBackendImpl::SamplePass(int32_t first_row, int32_t rows, const DeviceSamplingRequest& request,
                                         std::span<SampledToken> sampled, std::span<float> host_logits) {
  const auto vocab = static_cast<size_t>(config_.vocab_size);
  const int32_t end_row = first_row + rows;
  for (size_t h = 0; h < request.host_logit_rows.size(); ++h) {
    const int32_t r = request.host_logit_rows[h];
    if (r < first_row || r >= end_row) continue;
    ERNIE_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host_logits.data() + h * vocab,
                                               ws_.logits.data() + static_cast<size_t>(r - first_row) * vocab,
                                               vocab * sizeof(float), cudaMemcpyDeviceToHost, stream_.get()),
                               "cudaMemcpyAsync of fallback logits");
  }
  const bool whole_step = first_row == 0 && end_row == static_cast<int32_t>(inputs_logit_rows_);
  if (whole_step) return sampler_.Sample(ws_.logits.data(), first_row, request.rows, sampled, stream_.get());
  // Several passes: the rows of this one, gathered.
  std::vector<DeviceSampleRow> pass_rows;
  std::vector<size_t> where;
  for (size_t i = 0; i < request.rows.size(); ++i) {
    if (request.rows[i].logit_row < first_row || request.rows[i].logit_row >= end_row) continue;
    pass_rows.push_back(request.rows[i]);
    where.push_back(i);
  }
  std::vector<SampledToken> pass_out(pass_rows.size());
  ERNIE_RETURN_IF_ERROR(sampler_.Sample(ws_.logits.data(), first_row, pass_rows, pass_out, stream_.get()));
  for (size_t k = 0; k < where.size(); ++k) sampled[where[k]] = std::move(pass_out[k]);
  return absl::OkStatus();
}

absl::Status CudaBackendImpl::ForwardAndSample(const StepBatch& batch, const DeviceSamplingRequest& request,
                                               std::span<SampledToken> sampled, std::span<float> host_logits) {
  ERNIE_RETURN_IF_ERROR(ValidateStepBatchShape(batch, kv_shape_, max_tokens_, config_.vocab_size));
  ERNIE_RETURN_IF_ERROR(ValidateDeviceSamplingRequest(batch, request, config_.vocab_size, sampled, host_logits));
  ERNIE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_), "cudaSetDevice");  // the current device is per thread
  inputs_logit_rows_ = static_cast<int64_t>(batch.logit_token_indices.size());
  const absl::Status step = RunStep(batch, [&](int32_t first_row, int32_t rows) {
    return SamplePass(first_row, rows, request, sampled, host_logits);
  });
  // As Forward: wait for everything enqueued (the fallback copies too).
  const absl::Status done = CudaStatus(cudaStreamSynchronize(stream_.get()), "forward and sample step");
  return step.ok() ? done : step;
}

}  // namespace ernie::cuda
