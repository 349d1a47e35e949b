#include "tools/make_model/random_weights.h"

#include <bit>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/util/half.h"
#include "tools/make_model/ernie_special_tokens.h"

namespace ernie::make_model {
namespace {

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t Fnv1a64(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

void StoreLittleEndian(uint8_t* out, uint32_t value, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(value >> (8 * i));
}

}  // namespace

float StandardNormalAt(uint64_t key, uint64_t index) {
  const uint64_t bits = SplitMix64(key ^ (index * 0xd1b54a32d192ed03ull));
  const uint32_t sum = static_cast<uint32_t>(bits & 0xffff) + static_cast<uint32_t>((bits >> 16) & 0xffff) +
                       static_cast<uint32_t>((bits >> 32) & 0xffff) + static_cast<uint32_t>(bits >> 48);
  // Four uniforms on [0, 1): mean 2, variance 4/12. (sum + 2) centres each
  // 16-bit lane on its half-step so the result is symmetric about 0.
  constexpr float kScale = 1.7320508f / 65536.0f;  // sqrt(3) / 2^16
  return (static_cast<float>(sum) + 2.0f - 2.0f * 65536.0f) * kScale;
}

uint64_t TensorStreamKey(uint64_t seed, const TensorEntry& tensor) {
  return SplitMix64(SplitMix64(seed) ^ Fnv1a64(tensor.name));
}

float WeightValueAt(uint64_t key, const TensorEntry& tensor, uint64_t index) {
  const float z = StandardNormalAt(key, index);
  switch (tensor.kind) {
    case WeightKind::kNorm: return 1.0f + kNormGainStddev * z;
    case WeightKind::kEmbedding: {
      // Rows of ids the tokenizer only fills (unused filler pieces, and rows
      // past its vocabulary) are kept near zero, so a random demo model
      // mostly picks real pieces instead of "<unused:N>" filler text.
      const int64_t row = tensor.shape.size() == 2 ? static_cast<int64_t>(index) / tensor.shape[1] : 0;
      const bool filler = (row >= kFillerEmbeddingRowsBegin && row < kEndOfSentenceId) || row > kBeginOfSentenceId;
      return (filler ? kFillerEmbeddingScale : 1.0f) * kEmbeddingStddev * z;
    }
    case WeightKind::kBias: return kBiasStddev * z;
    case WeightKind::kProjection:
      return z / std::sqrt(static_cast<float>(tensor.fan_in > 0 ? tensor.fan_in : 1));
  }
  return z;
}

absl::Status FillWeightBytes(uint64_t seed, const TensorEntry& tensor, WeightDtype dtype,
                             uint64_t byte_offset, std::span<uint8_t> out) {
  const size_t element_bytes = WeightDtypeBytes(dtype);
  if (byte_offset % element_bytes != 0 || out.size() % element_bytes != 0) {
    return absl::InvalidArgumentError(absl::StrCat("weights of '", tensor.name, "': chunk [",
                                                   byte_offset, ", +", out.size(),
                                                   ") is not aligned to ", element_bytes, " bytes"));
  }
  const uint64_t key = TensorStreamKey(seed, tensor);
  const uint64_t first = byte_offset / element_bytes;
  const size_t count = out.size() / element_bytes;
  uint8_t* dst = out.data();
  for (size_t i = 0; i < count; ++i, dst += element_bytes) {
    const float value = WeightValueAt(key, tensor, first + i);
    switch (dtype) {
      case WeightDtype::kBFloat16: StoreLittleEndian(dst, FloatToBf16(value), 2); break;
      case WeightDtype::kFloat16: StoreLittleEndian(dst, FloatToF16(value), 2); break;
      case WeightDtype::kFloat32: StoreLittleEndian(dst, std::bit_cast<uint32_t>(value), 4); break;
    }
  }
  return absl::OkStatus();
}

}  // namespace ernie::make_model
