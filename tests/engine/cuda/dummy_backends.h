// The setup both --load-format dummy tests share (cuda_moe_test's bf16
// checkpoint, cuda_moe_awq_test's int4 one): a checkpoint loaded with its
// weights, the same folder loaded as dummy, and three CUDA backends on them
// (from the checkpoint, and two from the dummy load to compare for
// determinism). A failure is a test failure; the caller ASSERTs ok().
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "engine/backend/cuda/cuda_backend.h"
#include "engine/model/ernie4_5_weights.h"

namespace ernie::testing {

struct DummyAndCheckpointBackends {
  std::unique_ptr<LoadedModel> real, dummy;  // outlive the backends made from them
  std::unique_ptr<CudaBackend> from_checkpoint, a, b;
  bool ok() const { return from_checkpoint != nullptr && a != nullptr && b != nullptr; }
};

inline DummyAndCheckpointBackends MakeDummyAndCheckpointBackends(const std::string& dir,
                                                                 const CudaBackendOptions& options) {
  DummyAndCheckpointBackends out;
  auto real = LoadModel(dir);
  auto dummy = LoadModel(dir, "dummy");
  EXPECT_TRUE(real.ok()) << real.status();
  EXPECT_TRUE(dummy.ok()) << dummy.status();
  if (!real.ok() || !dummy.ok()) return out;
  out.real = std::move(*real);
  out.dummy = std::move(*dummy);
  EXPECT_TRUE(out.dummy->dummy_weights);
  for (auto [model, backend] : {std::pair{out.real.get(), &out.from_checkpoint}, std::pair{out.dummy.get(), &out.a},
                                std::pair{out.dummy.get(), &out.b}}) {
    auto created = CreateCudaBackend(*model, options);
    EXPECT_TRUE(created.ok()) << created.status();
    if (created.ok()) *backend = std::move(*created);
  }
  return out;
}

}  // namespace ernie::testing
