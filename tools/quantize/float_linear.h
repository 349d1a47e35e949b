// A linear's weights widened to float32 while ernie-quantize scales them:
// AWQ multiplies a linear's input columns by s and divides the rows of the
// op before it (a linear's outputs, with its bias) by s, then rounds.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/model/ernie4_5_weights.h"
#include "tools/quantize/output_checkpoint.h"

namespace ernie::quantize {

struct FloatLinear {
  const LinearWeights* lin = nullptr;
  std::vector<float> w;     // [out, in]
  std::vector<float> bias;  // [out]; empty without one

  int64_t out() const { return lin->out_features(); }
  int64_t in() const { return lin->in_features(); }
  void ScaleColumns(const std::vector<float>& s);  // w[o][i] *= s[i]
  void DivideRows(const std::vector<float>& s);    // w[o][i] /= s[o], bias[o] /= s[o]
};

// `lin` (a float linear) widened.
FloatLinear LoadFloatLinear(const LinearWeights& lin);

// Writes `f` into `out` as AWQ tensors of `group` inputs a scale (and its
// bias, in the bias's own dtype).
void EmitQuantized(const FloatLinear& f, int64_t group, OutputCheckpoint& out);

// A float vector tensor (a norm's weight) divided by s into `out`; nothing
// when `t` is null.
void FoldDivide(const TensorView* t, const std::vector<float>& s, OutputCheckpoint& out);

// A tensor widened to float32.
std::vector<float> WidenTensor(const TensorView& t);

}  // namespace ernie::quantize
