// ernie-awq-dequant MODEL_DIR OUT.safetensors: the engine's dequantisation
// (DequantizeAwqRows, awq_format.h) of every AWQ linear of an AutoAWQ
// checkpoint, written as float32 tensors "<prefix>.weight_t" [in, out]
// (W^T, AutoAWQ's orientation). tools/reference/awq_dequant_reference.py
// computes the same tensors independently; the test compares them bit for bit.
// Exit codes: 0 done, 2 usage error, 1 failure.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/model/ernie4_5_weights.h"
#include "engine/model/safetensors_writer.h"

namespace {

struct Dequantized {
  std::string name;
  int64_t in = 0, out = 0;
  std::vector<float> values;  // [in, out]
};

void Add(const ernie::LinearWeights& lin, std::vector<Dequantized>& all) {
  if (!lin.is_awq()) return;
  const std::string& q = lin.awq.qweight->name;
  Dequantized d{q.substr(0, q.size() - std::strlen(".qweight")) + ".weight_t", lin.in_features(), lin.out_features(), {}};
  d.values.resize(static_cast<size_t>(d.in * d.out));
  ernie::DequantizeAwqRows(lin.awq, 0, d.in, d.values.data());
  all.push_back(std::move(d));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: ernie-awq-dequant MODEL_DIR OUT.safetensors\n");
    return 2;
  }
  auto model = ernie::LoadModel(argv[1]);
  if (!model.ok()) {
    std::fprintf(stderr, "ernie-awq-dequant: %s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  std::vector<Dequantized> all;
  for (const ernie::Ernie45LayerWeights& l : (*model)->weights.layers) {
    for (const auto* lin : {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_proj, &l.up_proj, &l.down_proj})
      Add(*lin, all);
    for (const ernie::MlpWeights& e : l.moe.experts)
      for (const auto* lin : {&e.gate_proj, &e.up_proj, &e.down_proj}) Add(*lin, all);
    if (l.moe.has_shared)
      for (const auto* lin : {&l.moe.shared.gate_proj, &l.moe.shared.up_proj, &l.moe.shared.down_proj}) Add(*lin, all);
  }
  if (all.empty()) {
    std::fprintf(stderr, "ernie-awq-dequant: %s has no AWQ linears\n", argv[1]);
    return 1;
  }
  std::vector<ernie::model::SafetensorsTensorSpec> specs;
  for (const Dequantized& d : all) specs.push_back({d.name, "F32", {d.in, d.out}});
  const absl::Status status = ernie::model::WriteSafetensors(
      argv[2], specs, [&all](size_t i, uint64_t offset, std::span<uint8_t> chunk) {
        std::memcpy(chunk.data(), reinterpret_cast<const uint8_t*>(all[i].values.data()) + offset, chunk.size());
        return absl::OkStatus();
      });
  if (!status.ok()) {
    std::fprintf(stderr, "ernie-awq-dequant: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  std::printf("ernie-awq-dequant: %zu linears to %s\n", all.size(), argv[2]);
  return 0;
}
