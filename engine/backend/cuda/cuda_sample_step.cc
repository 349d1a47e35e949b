// ForwardAndSample: the forward pass of cuda_forward.cc, then per lm_head
// pass the device sampler over that pass's rows; no logits leave the device.
// LaunchForwardAndSample / WaitForSamples: the same split for overlapped
// steps (CudaBackendOptions::overlap_steps). A decode step is enqueued
// whole (inputs, fed-back tokens, forward, sampling, result copies, an
// event) and its wait reads the results; two staging slots in StepInputs
// and the sampler let step N+1 be written while step N runs.
#include <vector>

#include "engine/backend/cuda/cuda_backend_impl.h"
#include "absl/strings/str_cat.h"
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

absl::Status CudaBackendImpl::RunSampledStep(const StepBatch& batch, const DeviceSamplingRequest& request,
                                             std::span<SampledToken> sampled) {
  // The sampler's staging slots are about to be reused.
  ERNIE_RETURN_IF_ERROR(ReadLaunchedSteps());
  // Tokens known on the host are written into the upload.
  const StepBatch run = last_launch_.FillIn(batch);
  inputs_logit_rows_ = static_cast<int64_t>(batch.logit_token_indices.size());
  const absl::Status step = RunStep(run, [&](int32_t first_row, int32_t rows) {
    return SamplePass(first_row, rows, request, sampled);
  });
  // As Forward: wait for everything enqueued.
  const absl::Status done = CudaStatus(cudaStreamSynchronize(stream_.get()), "forward and sample step");
  ERNIE_RETURN_IF_ERROR(step.ok() ? done : step);
  last_launch_.RecordOnHost(sampled);
  return absl::OkStatus();
}

absl::Status CudaBackendImpl::ReadLaunchedSteps() {
  for (LaunchedStep& step : launched_) {
    if (!step.on_device) continue;
    step.on_device = false;
    step.status = CudaStatus(cudaEventSynchronize(launch_done_[step.event].get()), "overlapped step");
    if (step.status.ok() && !step.sampled.empty()) step.status = sampler_.Finish(step.sampled);
  }
  return absl::OkStatus();
}

absl::Status CudaBackendImpl::ForwardAndSample(const StepBatch& batch, const DeviceSamplingRequest& request,
                                               std::span<SampledToken> sampled) {
  ERNIE_RETURN_IF_ERROR(ValidateStepBatchShape(batch, kv_shape_, max_tokens_, config_.vocab_size));
  if (!batch.fed_back_tokens.empty())
    return absl::InvalidArgumentError("step batch: fed-back tokens are only for LaunchForwardAndSample");
  ERNIE_RETURN_IF_ERROR(ValidateDeviceSamplingRequest(batch, request, sampled));
  ERNIE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_), "cudaSetDevice");  // the current device is per thread
  return RunSampledStep(batch, request, sampled);
}

absl::Status CudaBackendImpl::LaunchForwardAndSample(const StepBatch& batch, const DeviceSamplingRequest& request) {
  ERNIE_RETURN_IF_ERROR(ValidateStepBatchShape(batch, kv_shape_, max_tokens_, config_.vocab_size));
  ERNIE_RETURN_IF_ERROR(last_launch_.Validate(batch));
  LaunchedStep step;
  step.sampled.resize(request.rows.size());
  ERNIE_RETURN_IF_ERROR(ValidateDeviceSamplingRequest(batch, request, step.sampled));
  ERNIE_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_), "cudaSetDevice");
  const auto rows = static_cast<int64_t>(batch.logit_token_indices.size());
  // Enqueued only as one lm_head pass sampled in one launch without a raw
  // pass (the decode steps overlap is for); anything else runs to the end here.
  const bool enqueue = overlap_steps_ && rows <= logit_rows_per_pass_ && sampler_.CanEnqueue(request.rows);
  if (!enqueue) {
    ERNIE_RETURN_IF_ERROR(RunSampledStep(batch, request, step.sampled));
    launched_.push_back(std::move(step));
    return absl::OkStatus();
  }
  // At most two steps on the device: the sampler has two staging slots.
  int on_device = 0;
  for (const LaunchedStep& s : launched_) on_device += s.on_device ? 1 : 0;
  if (on_device >= 2) ERNIE_RETURN_IF_ERROR(ReadLaunchedSteps());
  // Fed-back tokens come from the sampler's device buffers (RunStep): the
  // last launch was enqueued, so it sampled every row in one launch. Else
  // its tokens are on the host.
  const StepBatch run = last_launch_.FillIn(batch);
  inputs_logit_rows_ = rows;
  absl::Status enqueued = RunStep(run, [&](int32_t first_row, int32_t) {
    return sampler_.Enqueue(ws_.logits.data(), first_row, request.rows, stream_.get());
  });
  if (enqueued.ok()) {
    step.event = next_launch_event_;
    next_launch_event_ ^= 1;
    enqueued = CudaStatus(cudaEventRecord(launch_done_[step.event].get(), stream_.get()), "cudaEventRecord");
  }
  if (!enqueued.ok()) {
    (void)cudaStreamSynchronize(stream_.get());  // nothing of it may run on behind the error
    return enqueued;
  }
  step.on_device = true;
  last_launch_.RecordOnDevice(static_cast<int64_t>(request.rows.size()));
  launched_.push_back(std::move(step));
  return absl::OkStatus();
}

absl::Status CudaBackendImpl::WaitForSamples(std::span<SampledToken> sampled) {
  if (launched_.empty()) return absl::FailedPreconditionError("the cuda backend has no launched step to wait for");
  LaunchedStep step = std::move(launched_.front());
  launched_.pop_front();
  if (step.on_device) {
    step.status = CudaStatus(cudaEventSynchronize(launch_done_[step.event].get()), "overlapped step");
    if (step.status.ok() && !step.sampled.empty()) step.status = sampler_.Finish(step.sampled);
  }
  ERNIE_RETURN_IF_ERROR(step.status);
  return HandOverLaunchedResults(step.sampled, sampled);
}

}  // namespace ernie::cuda
