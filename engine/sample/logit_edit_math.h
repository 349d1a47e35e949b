// The arithmetic of the logits processors that edit single logits
// (logit_bias, repetition / frequency / presence penalties), shared by the
// host Sampler (logits_processors.cc) and the CUDA edit kernel
// (engine/backend/cuda/kernels/logit_edits.cu), written so that host and
// device round alike. No dependencies: nvcc compiles it as is.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define ERNIE_HOST_DEVICE __host__ __device__
#else
#define ERNIE_HOST_DEVICE
#endif

namespace ernie {

// HF / vLLM's repetition penalty: a positive logit divided, the others multiplied.
ERNIE_HOST_DEVICE inline float RepetitionPenalized(float logit, float penalty) {
#if defined(__CUDA_ARCH__)
  return logit > 0.0f ? __fdiv_rn(logit, penalty) : __fmul_rn(logit, penalty);
#else
  return logit > 0.0f ? logit / penalty : logit * penalty;
#endif
}

// OpenAI's penalties for a token seen `count` > 0 times in the output:
// logit - (frequency * count + presence), the multiply-add fused explicitly
// (the host compiler would otherwise be free to fuse it or not).
ERNIE_HOST_DEVICE inline float FrequencyPresencePenalized(float logit, int32_t count, float frequency, float presence) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(logit, __fmaf_rn(frequency, static_cast<float>(count), presence));
#else
  return logit - std::fma(frequency, static_cast<float>(count), presence);
#endif
}

ERNIE_HOST_DEVICE inline float LogitBiased(float logit, float bias) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(logit, bias);
#else
  return logit + bias;
#endif
}

// One token's edit (16 bytes, copied to the device as is).
struct LogitEdit {
  int32_t token_id = 0;
  int32_t output_count = 0;  // times it occurs in the output so far
  float bias = 0.0f;         // logit_bias[token_id], when has_bias
  uint8_t has_bias = 0;
  uint8_t in_prompt = 0;     // among the prompt's distinct ids (repetition penalty only)
  uint8_t unused[2] = {};
};

// The row's parameters the edits read (1 / 0 / 0: off).
struct LogitEditParams {
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
};

// The value ApplyLogitsProcessors (bans aside) leaves in `logit` for the
// edit's token: bias, then the repetition penalty (prompt or output), then
// the frequency and presence penalties (output).
ERNIE_HOST_DEVICE inline float EditedLogit(float logit, const LogitEdit& e, const LogitEditParams& p) {
  if (e.has_bias) logit = LogitBiased(logit, e.bias);
  if (p.repetition_penalty != 1.0f && (e.in_prompt || e.output_count > 0))
    logit = RepetitionPenalized(logit, p.repetition_penalty);
  if ((p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) && e.output_count > 0)
    logit = FrequencyPresencePenalized(logit, e.output_count, p.frequency_penalty, p.presence_penalty);
  return logit;
}

}  // namespace ernie
