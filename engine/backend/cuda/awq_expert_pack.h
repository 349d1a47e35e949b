// Host-side preparation of a mixture-of-experts layer's AWQ int4 experts for
// the grouped kernels (kernels/grouped_awq_gemv.h), once at load:
//   gate|up: each expert's gate and up linears side by side along the
//            outputs, interleaved by 8 (outputs 16i .. 16i+7 are gate
//            features 8i .. 8i+7, 16i+8 .. 16i+15 the up features of the
//            same indices), so the gate/up launch ends in SiLU-and-mul just
//            like the bf16 one (device_weights.h). AutoAWQ packs 8 outputs
//            per int32, so this interleaves whole words of qweight and
//            qzeros and runs of 8 scales: no nibble moves;
//   shared:  the shared experts (one MLP of width S x I) become S
//            pseudo-experts of width I after the E routed ones
//            (moe_routing.h says why that is the same function): gate and
//            up split along their outputs, down along its inputs, which
//            needs I % group_size == 0 (a group must not straddle two
//            pseudo-experts);
// then every linear repacked (kernels/awq_repack.h) and stacked, expert e at
// e times one expert's words (kernels/grouped_awq_gemv.h's AwqExpertsView).
// Plain host code, so it is tested without a GPU.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/backend/cuda/kernels/awq_repack.h"

namespace ernie::cuda {

// AutoAWQ tensors that own their storage (a piece cut from a checkpoint's).
struct AwqHostLinear {
  std::vector<int32_t> qweight;  // [k, n/8]
  std::vector<int32_t> qzeros;   // [k/group_size, n/8]
  std::vector<uint16_t> scales;  // [k/group_size, n] fp16 bits
  int32_t k = 0, n = 0, group_size = 0;

  AwqRawLinear raw() const {
    return {.qweight = qweight, .qzeros = qzeros, .scales = scales, .k = k, .n = n, .group_size = group_size};
  }
};

// gate|up interleaved by 8 outputs (above): n = 2 gate.n. InvalidArgument
// naming `name` when the two differ in shape or group size.
absl::StatusOr<AwqHostLinear> InterleaveAwqGateUp(const AwqRawLinear& gate, const AwqRawLinear& up,
                                                  const std::string& name);

// Outputs [first, first + width) of `w` (multiples of 8).
absl::StatusOr<AwqHostLinear> AwqOutputSlice(const AwqRawLinear& w, int64_t first, int64_t width,
                                             const std::string& name);

// Inputs [first, first + rows) of `w`: whole groups only, so first and rows
// must be multiples of group_size (InvalidArgument naming `name` and the sizes).
absl::StatusOr<AwqHostLinear> AwqInputSlice(const AwqRawLinear& w, int64_t first, int64_t rows,
                                            const std::string& name);

// One SiLU-gated MLP's three linears; `name` prefixes error messages (the
// checkpoint's tensor prefix, e.g. "model.layers.1.mlp.experts.0").
struct AwqMlpRaw {
  AwqRawLinear gate, up, down;
  std::string name;
};

// The stacks one MoE layer's grouped launches read, repacked:
//   gate_up: [experts][AwqPackedWords(2 I, H)] / [AwqRecordWords(2 I, H, g)]
//   down:    [experts][AwqPackedWords(H, I)] / [AwqRecordWords(H, I, g)]
// experts = E + S: the routed ones in order, then the shared pseudo-experts.
struct AwqExpertStacks {
  std::vector<uint32_t> gate_up_packed, gate_up_records, down_packed, down_records;
  int32_t experts = 0, hidden = 0, width = 0, group_size = 0;
};

// `routed`: the E experts of width I (gate/up [I out, H in], down [H out,
// I in]); `shared`: nullptr, or the shared MLP of width S x I. InvalidArgument
// naming the tensor and sizes when a shape does not fit the kernels (H and I
// multiples of 64, the same group size everywhere, S x I split on groups).
absl::StatusOr<AwqExpertStacks> StackAwqExperts(std::span<const AwqMlpRaw> routed, const AwqMlpRaw* shared,
                                                int64_t width);

}  // namespace ernie::cuda
