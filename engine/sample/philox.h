// Counter-based random numbers for sampling. A draw is a pure function of
// (seed, sample index, output position): no generator state is carried from
// step to step, so a row's token never depends on which other rows share its
// batch, the order they come in, or whether the sequence was preempted and
// recomputed.
#pragma once

#include <array>
#include <cstdint>

namespace ernie {

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC'11): the same bijection as Random123's philox4x32_10, cuRAND's Philox and
// torch's CUDA generator, so a GPU sampler can reproduce these draws.
std::array<uint32_t, 4> Philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

// A uniform double in [0, 1) with 53 random bits, for the draw of output
// position `position` of sample `sample_index` of a request seeded `seed`.
double SamplingUniform(uint64_t seed, uint32_t sample_index, uint64_t position);

// A fresh seed for a request that did not bring one, drawn once at admission
// from a process-wide generator (SplitMix64 over an atomic counter that starts
// from std::random_device). Thread-safe and lock-free. Unseeded requests thus
// differ from each other and from run to run, yet each stays reproducible
// within its own lifetime (e.g. across preemption).
uint64_t DrawRequestSeed();

// Makes the sequence of DrawRequestSeed() values a function of `base` (vLLM's
// --seed): the same server seed and the same request order give the same
// tokens to requests that bring no seed. Call before serving.
void SetRequestSeedBase(uint64_t base);

}  // namespace ernie
