#include "tools/quantize/float_linear.h"

#include <string>

#include "engine/backend/cpu/elementwise.h"
#include "tools/quantize/group_quantizer.h"

namespace ernie::quantize {

std::vector<float> WidenTensor(const TensorView& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  cpu::WidenToFloat(t, v.data());
  return v;
}

void FloatLinear::ScaleColumns(const std::vector<float>& s) {
  for (int64_t o = 0; o < out(); ++o)
    for (int64_t i = 0; i < in(); ++i) w[static_cast<size_t>(o * in() + i)] *= s[static_cast<size_t>(i)];
}

void FloatLinear::DivideRows(const std::vector<float>& s) {
  for (int64_t o = 0; o < out(); ++o)
    for (int64_t i = 0; i < in(); ++i) w[static_cast<size_t>(o * in() + i)] /= s[static_cast<size_t>(o)];
  for (size_t o = 0; o < bias.size(); ++o) bias[o] /= s[o];
}

FloatLinear LoadFloatLinear(const LinearWeights& lin) {
  FloatLinear f{&lin, WidenTensor(*lin.weight), {}};
  if (lin.bias != nullptr) f.bias = WidenTensor(*lin.bias);
  return f;
}

void EmitQuantized(const FloatLinear& f, int64_t group, OutputCheckpoint& out) {
  const std::string& name = f.lin->weight->name;
  const std::string prefix = name.substr(0, name.size() - std::string(".weight").size());
  out.ReplaceWithAwq(prefix, QuantizeGroupwise(f.w.data(), f.out(), f.in(), group));
  // Widened and rounded back, an unscaled bias is its own bits.
  if (f.lin->bias != nullptr) out.ReplaceFloat(*f.lin->bias, f.bias);
}

void FoldDivide(const TensorView* t, const std::vector<float>& s, OutputCheckpoint& out) {
  if (t == nullptr) return;
  std::vector<float> v = WidenTensor(*t);
  for (size_t i = 0; i < v.size(); ++i) v[i] /= s[i];
  out.ReplaceFloat(*t, v);
}

}  // namespace ernie::quantize
