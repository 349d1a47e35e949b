#include "tests/engine/cuda/awq_test_case.h"

#include "engine/util/half.h"

namespace ernie::testing {

std::vector<int32_t> PackAwq(const std::vector<uint8_t>& values, int rows, int n) {
  std::vector<int32_t> words(static_cast<size_t>(rows) * n / 8);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < n / 8; ++j) {
      uint32_t word = 0;
      for (int i = 0; i < 8; ++i)
        word |= uint32_t{values[static_cast<size_t>(r) * n + 8 * j + cuda::kAwqOrder[i]]} << (4 * i);
      words[static_cast<size_t>(r) * (n / 8) + j] = static_cast<int32_t>(word);
    }
  return words;
}

std::vector<float> DequantizeAwq(const cuda::AwqRawLinear& raw) {
  const int n = raw.n, k = raw.k, group = raw.group_size;
  auto nibble_at = [n](std::span<const int32_t> words, int row, int col) {
    const auto word = static_cast<uint32_t>(words[static_cast<size_t>(row) * (n / 8) + col / 8]);
    for (int i = 0; i < 8; ++i)
      if (cuda::kAwqOrder[i] == col % 8) return static_cast<int>((word >> (4 * i)) & 0xF);
    return -1;
  };
  std::vector<float> w(static_cast<size_t>(n) * k);
  for (int kk = 0; kk < k; ++kk)
    for (int j = 0; j < n; ++j) {
      const int g = kk / group;
      const float s = F16ToFloat(raw.scales[static_cast<size_t>(g) * n + j]);
      w[static_cast<size_t>(j) * k + kk] =
          static_cast<float>(nibble_at(raw.qweight, kk, j) - nibble_at(raw.qzeros, g, j)) * s;
    }
  return w;
}

AwqCase MakeAwqCase(int n, int k, int group, std::mt19937& gen) {
  AwqCase c{.k = k, .n = n, .group = group};
  std::uniform_int_distribution<int> nibble(0, 15);
  std::uniform_real_distribution<float> scale(0.002f, 0.05f);
  std::vector<uint8_t> q(static_cast<size_t>(k) * n), z(static_cast<size_t>(k / group) * n);
  for (auto& v : q) v = static_cast<uint8_t>(nibble(gen));
  for (auto& v : z) v = static_cast<uint8_t>(nibble(gen));
  c.scales.resize(z.size());
  for (auto& s : c.scales) s = FloatToF16(scale(gen));
  c.qweight = PackAwq(q, k, n);
  c.qzeros = PackAwq(z, k / group, n);
  // Unpack the packed words again (the reference reads what the kernels read).
  c.w = DequantizeAwq(c.Raw());
  return c;
}

}  // namespace ernie::testing
