#include "engine/sample/philox.h"

#include <atomic>
#include <random>

namespace ernie {
namespace {

constexpr uint32_t kMultiplier0 = 0xD2511F53u;
constexpr uint32_t kMultiplier1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1
constexpr int kRounds = 10;

uint64_t SplitMix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

std::array<uint32_t, 4> Philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key) {
  for (int round = 0; round < kRounds; ++round) {
    const uint64_t product0 = static_cast<uint64_t>(kMultiplier0) * counter[0];
    const uint64_t product1 = static_cast<uint64_t>(kMultiplier1) * counter[2];
    const auto hi0 = static_cast<uint32_t>(product0 >> 32), lo0 = static_cast<uint32_t>(product0);
    const auto hi1 = static_cast<uint32_t>(product1 >> 32), lo1 = static_cast<uint32_t>(product1);
    counter = {hi1 ^ counter[1] ^ key[0], lo1, hi0 ^ counter[3] ^ key[1], lo0};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return counter;
}

double SamplingUniform(uint64_t seed, uint32_t sample_index, uint64_t position) {
  // Counter words: the position (64 bits), the sample, and a zero "purpose"
  // word left free for other per-position draws (e.g. speculative decoding).
  const std::array<uint32_t, 4> bits =
      Philox4x32({static_cast<uint32_t>(position), static_cast<uint32_t>(position >> 32), sample_index, 0},
                 {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  const uint64_t mantissa = (static_cast<uint64_t>(bits[0] >> 5) << 26) | (bits[1] >> 6);  // 27 + 26 bits
  return static_cast<double>(mantissa) * 0x1.0p-53;
}

namespace {

std::atomic<uint64_t>& SeedState() {
  static std::atomic<uint64_t> state{[] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device();
  }()};
  return state;
}

}  // namespace

uint64_t DrawRequestSeed() {
  return SplitMix64(SeedState().fetch_add(0x9E3779B97F4A7C15ull, std::memory_order_relaxed));
}

void SetRequestSeedBase(uint64_t base) { SeedState().store(SplitMix64(base), std::memory_order_relaxed); }

}  // namespace ernie
