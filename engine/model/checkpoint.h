// The tensors of a Hugging Face model directory: model.safetensors, or the
// shards named by model.safetensors.index.json. Files are memory-mapped and
// every tensor is a view into its mapping (nothing is copied at load).
// Open returns once the headers are parsed; the tensors' pages are read in
// from disk in the background, in the order the loaders take them (the
// embedding, layer 0, 1, ..., then the rest), so a backend's upload follows
// the readers instead of waiting for every shard (a page not read yet is
// simply read on first use).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/tensor_view.h"
#include "engine/util/mapped_file.h"
#include "engine/util/page_in.h"

namespace ernie {

class Checkpoint {
 public:
  // Opens `dir`. Errors name the file: no safetensors at all (NotFound), an
  // index that is not JSON or names a missing shard, a tensor the index places
  // in one shard but found in another or not at all, a tensor in two shards.
  static absl::StatusOr<std::unique_ptr<Checkpoint>> Open(const std::string& dir);

  // The tensor called `name`, or NotFound naming the checkpoint directory.
  absl::StatusOr<const TensorView*> Find(const std::string& name) const;
  // Find() plus a check of the shape; InvalidArgument naming tensor, file,
  // expected and actual shapes.
  absl::StatusOr<const TensorView*> FindWithShape(const std::string& name,
                                                  const std::vector<int64_t>& shape) const;
  bool Has(const std::string& name) const { return tensors_.count(name) != 0; }

  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::string& dir() const { return dir_; }
  // Total bytes of tensor data across every file.
  int64_t total_bytes() const;

 private:
  Checkpoint() = default;
  absl::Status AddFile(const std::string& file_name);
  // Starts page_in_ over every tensor in load order.
  void StartPageIn();

  std::string dir_;                      // the model directory
  std::vector<MappedFile> files_;        // keeps the views below alive
  std::map<std::string, TensorView> tensors_;  // every tensor of every shard, by name
  // Declared last: stopped and joined before the mappings go.
  std::unique_ptr<BackgroundPageIn> page_in_;
};

}  // namespace ernie
