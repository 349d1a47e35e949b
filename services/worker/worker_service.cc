#include "services/worker/worker_service.h"

#include "absl/strings/str_cat.h"
#include "services/common/grpc_handoff.h"
#include "services/worker/generate_many_reactor.h"
#include "services/worker/generate_reactor.h"
#include "services/worker/proto_convert.h"

namespace ernie::worker {

namespace {

// A finished-at-once stream (errors before anything is streamed).
class RejectedStream : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  explicit RejectedStream(grpc::Status status) {
    HandToGrpc(this);
    Finish(std::move(status));
  }
  void OnDone() override {
    TakeFromGrpc(this);
    delete this;
  }
};

grpc::ServerUnaryReactor* Respond(grpc::CallbackServerContext* context, grpc::Status status) {
  auto* reactor = context->DefaultReactor();
  reactor->Finish(std::move(status));
  return reactor;
}

}  // namespace

void WorkerService::Attach(EngineLoop* engine, ServedModelInfo info) {
  info_ = std::move(info);
  engine_.store(engine);
}

grpc::ServerWriteReactor<v1::GenerateResponse>* WorkerService::Generate(grpc::CallbackServerContext* context,
                                                                        const v1::GenerateRequest* request) {
  EngineLoop* engine = engine_.load();
  if (engine == nullptr) return new RejectedStream(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the model is still loading"));
  if (draining_) return new RejectedStream(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the worker is draining"));
  EngineRequest req = FromProto(*request);
  if (req.request_id.empty()) {
    // Fall back to the gateway's x-request-id, then to a local counter.
    auto it = context->client_metadata().find("x-request-id");
    req.request_id = it != context->client_metadata().end() ? std::string(it->second.data(), it->second.size())
                                                            : absl::StrCat("worker-", next_id_++);
  }
  const bool logprobs = req.sampling.logprobs;
  return new GenerateReactor(engine, std::move(req), logprobs);
}

grpc::ServerBidiReactor<v1::GenerateManyRequest, v1::GenerateManyResponse>* WorkerService::GenerateMany(
    grpc::CallbackServerContext* /*context*/) {
  return new GenerateManyReactor(&engine_, &draining_);
}

grpc::ServerUnaryReactor* WorkerService::Abort(grpc::CallbackServerContext* context, const v1::AbortRequest* request,
                                               v1::AbortResponse* response) {
  EngineLoop* engine = engine_.load();
  if (engine == nullptr) return Respond(context, grpc::Status(grpc::StatusCode::UNAVAILABLE, "the model is still loading"));
  for (const auto& id : request->request_ids()) engine->Abort(id);
  response->set_aborted(request->request_ids_size());
  return Respond(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* WorkerService::GetModelInfo(grpc::CallbackServerContext* context, const v1::GetModelInfoRequest*,
                                                      v1::ModelInfo* response) {
  if (engine_.load() == nullptr) return Respond(context, grpc::Status(grpc::StatusCode::UNAVAILABLE, "the model is still loading"));
  response->set_architecture(info_.architecture);
  response->set_max_model_len(info_.max_model_len);
  response->set_vocab_size(info_.vocab_size);
  for (int32_t id : info_.eos_token_ids) response->add_eos_token_ids(id);
  response->set_dtype(info_.dtype);
  response->set_backend(info_.backend);
  response->set_model_path(info_.model_path);
  response->set_block_size(info_.block_size);
  response->set_num_kv_blocks(info_.num_kv_blocks);
  return Respond(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* WorkerService::GetLoad(grpc::CallbackServerContext* context, const v1::GetLoadRequest*,
                                                 v1::Load* response) {
  EngineLoop* engine = engine_.load();
  if (engine == nullptr) return Respond(context, grpc::Status(grpc::StatusCode::UNAVAILABLE, "the model is still loading"));
  const EngineLoad load = engine->Load();
  response->set_running(load.running);
  response->set_waiting(load.waiting);
  response->set_kv_blocks_used(load.kv_blocks_used);
  response->set_kv_blocks_total(load.kv_blocks_total);
  response->set_kv_blocks_free(load.kv_blocks_free);
  response->set_draining(draining_);
  response->set_prefix_cache_queried_tokens(load.prefix_queried_tokens);
  response->set_prefix_cache_hit_tokens(load.prefix_hit_tokens);
  response->set_preemptions(load.preemptions);
  return Respond(context, grpc::Status::OK);
}

}  // namespace ernie::worker
