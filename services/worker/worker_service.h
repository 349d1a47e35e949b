// The Worker gRPC service (callback API) over an EngineLoop: Generate
// streams, Abort, GetModelInfo, GetLoad. Before the model is loaded and while
// draining, Generate answers UNAVAILABLE.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "engine/core/engine_loop.h"
#include "ernie/v1/worker.grpc.pb.h"

namespace ernie::worker {

struct ServedModelInfo {
  std::string architecture, dtype, backend, model_path;
  int32_t max_model_len = 0, vocab_size = 0, block_size = 0, num_kv_blocks = 0;
  std::vector<int32_t> eos_token_ids;
};

class WorkerService final : public v1::Worker::CallbackService {
 public:
  WorkerService() = default;

  // Called once, when the model is ready; the engine must outlive the service's calls.
  void Attach(EngineLoop* engine, ServedModelInfo info);
  // Refuse new requests from now on (running ones continue).
  void StartDraining() { draining_ = true; }
  bool draining() const { return draining_; }
  const std::atomic<bool>& draining_flag() const { return draining_; }  // for metrics, read at scrape time

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(grpc::CallbackServerContext* context,
                                                           const v1::GenerateRequest* request) override;
  grpc::ServerBidiReactor<v1::GenerateManyRequest, v1::GenerateManyResponse>* GenerateMany(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* Abort(grpc::CallbackServerContext* context, const v1::AbortRequest* request,
                                  v1::AbortResponse* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context, const v1::GetModelInfoRequest* request,
                                         v1::ModelInfo* response) override;
  grpc::ServerUnaryReactor* GetLoad(grpc::CallbackServerContext* context, const v1::GetLoadRequest* request,
                                    v1::Load* response) override;

 private:
  std::atomic<EngineLoop*> engine_{nullptr};  // null until the model is loaded
  ServedModelInfo info_;                      // written once before engine_ is set
  std::atomic<bool> draining_{false};
  std::atomic<uint64_t> next_id_{1};          // for requests that come without an id
};

}  // namespace ernie::worker
