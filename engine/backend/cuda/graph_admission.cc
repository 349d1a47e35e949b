#include "engine/backend/cuda/graph_admission.h"

namespace ernie::cuda {

bool GraphAdmission::ShouldCapture(uint64_t key) {
  if (admitted_ >= max_graphs_) return false;
  if (seen_once_.erase(key) > 0) {
    ++admitted_;
    return true;
  }
  if (static_cast<int>(seen_once_.size()) >= max_remembered_) seen_once_.clear();
  seen_once_.insert(key);
  return false;
}

}  // namespace ernie::cuda
