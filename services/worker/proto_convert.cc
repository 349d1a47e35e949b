#include "services/worker/proto_convert.h"

namespace ernie::worker {

SamplingParams FromProto(const v1::SamplingParams& p) {
  SamplingParams s;
  s.temperature = p.temperature();
  s.top_p = p.top_p() == 0.0f ? 1.0f : p.top_p();
  s.top_k = p.top_k() == 0 ? -1 : p.top_k();
  s.min_p = p.min_p();
  s.repetition_penalty = p.repetition_penalty() == 0.0f ? 1.0f : p.repetition_penalty();
  s.presence_penalty = p.presence_penalty();
  s.frequency_penalty = p.frequency_penalty();
  for (const auto& [id, bias] : p.logit_bias()) s.logit_bias[id] = bias;
  if (p.has_seed()) s.seed = p.seed();
  s.stop_token_ids.assign(p.stop_token_ids().begin(), p.stop_token_ids().end());
  s.ignore_eos = p.ignore_eos();
  s.min_tokens = p.min_tokens();
  if (p.max_tokens() != 0) s.max_tokens = p.max_tokens();
  s.logprobs = p.logprobs() || p.top_logprobs() > 0;
  s.top_logprobs = p.top_logprobs();
  s.n = p.n() == 0 ? 1 : p.n();
  return s;
}

EngineRequest FromProto(const v1::GenerateRequest& r) {
  EngineRequest req;
  req.request_id = r.request_id();
  req.prompt_token_ids.assign(r.prompt_token_ids().begin(), r.prompt_token_ids().end());
  req.sampling = FromProto(r.sampling());
  req.priority = r.priority();
  return req;
}

namespace {

v1::FinishReason ToProto(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return v1::FINISH_REASON_STOP;
    case FinishReason::kLength: return v1::FINISH_REASON_LENGTH;
    case FinishReason::kAbort: return v1::FINISH_REASON_ABORT;
    case FinishReason::kNone: break;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

}  // namespace

void MergeInto(const SampleOutput& out, bool with_logprobs, v1::GenerateResponse* r) {
  r->set_index(out.index);
  for (int32_t id : out.token_ids) r->add_token_ids(id);
  if (with_logprobs) {
    for (const SampledToken& t : out.logprobs) {
      auto* lp = r->add_logprobs();
      lp->set_token_id(t.token_id);
      lp->set_logprob(t.logprob.value_or(0.0f));
      for (const TokenLogprob& alt : t.top_logprobs) {
        auto* top = lp->add_top();
        top->set_token_id(alt.token_id);
        top->set_logprob(alt.logprob);
      }
    }
  }
  r->set_prompt_tokens(out.prompt_tokens);
  r->set_completion_tokens(out.completion_tokens);
  r->set_cached_prompt_tokens(out.cached_prompt_tokens);
  if (out.finish_reason != FinishReason::kNone) r->set_finish_reason(ToProto(out.finish_reason));
  if (out.stop_token_id) r->set_stop_token_id(*out.stop_token_id);
}

}  // namespace ernie::worker
