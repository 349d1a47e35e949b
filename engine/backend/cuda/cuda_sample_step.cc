// ForwardAndSample: the forward pass of cuda_forward.cc, then per lm_head
// pass the device sampler over that pass's rows; no logits leave the device.
#include <vector>

#include "engine/backend/cuda/cuda_backend_impl.h"
#include "engine/util/status_macros.h"

namespace ernie::cuda {

absl::Status CudaBackendImpl::SamplePass(int32_t first_row, int32_t rows, const DeviceSamplingRequest& request,
                                         std::span<SampledToken> sampled) {
  const int32_t end_row = first_row + rows;
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
                                               std::span<SampledToken> sampled) {
  ERNIE_RETURN_IF_ERROR(ValidateStepBatchShape(batch, kv_shape_, max_tokens_, config_.vocab_size));
  ERNIE_RETURN_IF_ERROR(ValidateDeviceSamplingRequest(batch, request, sampled));
  ERNIE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_), "cudaSetDevice");  // the current device is per thread
  inputs_logit_rows_ = static_cast<int64_t>(batch.logit_token_indices.size());
  const absl::Status step = RunStep(batch, [&](int32_t first_row, int32_t rows) {
    return SamplePass(first_row, rows, request, sampled);
  });
  // As Forward: wait for everything enqueued.
  const absl::Status done = CudaStatus(cudaStreamSynchronize(stream_.get()), "forward and sample step");
  return step.ok() ? done : step;
}

}  // namespace ernie::cuda
