#include "tools/bench/cuda/graph_timer.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ernie::bench {

namespace {

absl::Status Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", cudaGetErrorString(e)));
}

}  // namespace

absl::StatusOr<double> TimeLaunchesInGraph(cudaStream_t stream, int copies, int reps,
                                           const std::function<absl::Status(int)>& launch) {
  if (copies < 1 || reps < 1) return absl::InvalidArgumentError("TimeLaunchesInGraph: copies and reps must be >= 1");
  if (absl::Status first = launch(0); !first.ok()) return first;
  if (absl::Status s = Check(cudaStreamSynchronize(stream), "warm-up"); !s.ok()) return s;
  cudaGraph_t graph = nullptr;
  if (absl::Status s = Check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "begin capture");
      !s.ok())
    return s;
  absl::Status captured = absl::OkStatus();
  for (int i = 0; i < copies && captured.ok(); ++i) captured = launch(i);
  const cudaError_t end = cudaStreamEndCapture(stream, &graph);
  if (!captured.ok()) return captured;
  if (absl::Status s = Check(end, "end capture"); !s.ok()) return s;
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (absl::Status s = Check(instantiated, "instantiate"); !s.ok()) return s;
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<double> per_launch;
  absl::Status status = absl::OkStatus();
  for (int r = 0; r < reps + 2 && status.ok(); ++r) {
    cudaEventRecord(start, stream);
    status = Check(cudaGraphLaunch(exec, stream), "graph launch");
    cudaEventRecord(stop, stream);
    if (status.ok()) status = Check(cudaEventSynchronize(stop), "graph run");
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    if (r >= 2) per_launch.push_back(1e3 * ms / copies);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGraphExecDestroy(exec);
  if (!status.ok()) return status;
  std::sort(per_launch.begin(), per_launch.end());
  return per_launch[per_launch.size() / 2];
}

}  // namespace ernie::bench
