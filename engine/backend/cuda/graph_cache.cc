#include "engine/backend/cuda/graph_cache.h"

#include "engine/backend/cuda/cuda_check.h"
#include "engine/util/status_macros.h"

namespace ernie::cuda {

GraphCache::~GraphCache() {
  for (auto& [key, exec] : graphs_)
    if (exec != nullptr) cudaGraphExecDestroy(exec);
}

absl::Status GraphCache::Run(uint64_t key, cudaStream_t stream, const std::function<absl::Status()>& enqueue) {
  auto it = graphs_.find(key);
  bool fresh = false;  // captured by this call: counted by captured_, not as a replay
  if (it == graphs_.end()) {
    if (!admission_.ShouldCapture(key)) {
      ++direct_runs_;
      return enqueue();
    }
    ERNIE_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                               "cudaStreamBeginCapture");
    const absl::Status captured = enqueue();
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
    cudaGraphExec_t exec = nullptr;
    if (captured.ok() && ended == cudaSuccess && cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) exec = nullptr;
    if (graph != nullptr) cudaGraphDestroy(graph);
    (void)cudaGetLastError();  // a failed capture is not an error of the step: it runs eagerly below
    if (exec != nullptr) ++captured_;
    fresh = true;
    it = graphs_.emplace(key, exec).first;
  }
  if (it->second == nullptr) {
    ++direct_runs_;
    return enqueue();
  }
  if (!fresh) ++replays_;
  return CudaStatus(cudaGraphLaunch(it->second, stream), "cudaGraphLaunch");
}

}  // namespace ernie::cuda
