// Host-side cost of KV block bookkeeping: allocate / append / free cycles for
// 256 sequences, reported per operation (the "time_per_op" counter).
//
//   build-<you>/tools/bench/ernie_bench_kv --benchmark_min_time=0.2
#include <cstdint>
#include <optional>
#include <vector>

#include "benchmark/benchmark.h"
#include "engine/kv/block_pool.h"
#include "engine/kv/kv_cache_manager.h"

namespace ernie::kv {
namespace {

constexpr int kNumSequences = 256;
constexpr int kBlockSize = 16;

void ReportPerOp(benchmark::State& state, int64_t ops_per_iteration) {
  state.SetItemsProcessed(state.iterations() * ops_per_iteration);
  // Inverted rate: seconds per operation, printed with an SI prefix ("28ns").
  state.counters["time_per_op"] = benchmark::Counter(
      static_cast<double>(ops_per_iteration),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// Raw pool: each of 256 sequences takes 8 blocks, then all are released.
void BM_BlockPoolAllocateFree(benchmark::State& state) {
  constexpr int kBlocksPerSequence = 8;
  BlockPool pool = *BlockPool::Create(kNumSequences * kBlocksPerSequence);
  std::vector<std::vector<int32_t>> tables(kNumSequences);
  auto cycle = [&] {
    for (auto& table : tables) {
      std::optional<std::vector<int32_t>> blocks = pool.Allocate(kBlocksPerSequence);
      if (!blocks.has_value()) return false;
      table = *std::move(blocks);
    }
    for (const auto& table : tables) {
      if (!pool.Free(table).ok()) return false;
    }
    return true;
  };
  for (auto _ : state) {
    if (!cycle()) {
      state.SkipWithError("pool ran out or refused a free");
      break;
    }
  }
  ReportPerOp(state, 2 * kNumSequences);
}
BENCHMARK(BM_BlockPoolAllocateFree);

// Manager: 256 sequences with a shared 64-token system prompt and 64 unique
// prompt tokens are admitted (lookup + start + commit), decode
// `state.range(1)` tokens one per step (allocate + commit), and are freed.
// state.range(0): prefix caching on (1) or off (0).
void BM_KvCacheManagerCycle(benchmark::State& state) {
  const bool caching = state.range(0) != 0;
  const int decode_steps = static_cast<int>(state.range(1));
  const int prompt_length = 128;
  const int max_length = prompt_length + decode_steps;
  const int32_t num_blocks = kNumSequences * ((max_length + kBlockSize - 1) / kBlockSize) * 2;
  KvCacheManager manager = *KvCacheManager::Create(
      {.num_blocks = num_blocks, .block_size = kBlockSize, .enable_prefix_caching = caching});

  std::vector<std::vector<int32_t>> tokens(kNumSequences);
  int32_t salt = 0;
  int64_t hit_tokens = 0;
  auto cycle = [&] {
    ++salt;  // fresh unique suffixes each iteration, so only the system prompt hits
    for (int s = 0; s < kNumSequences; ++s) {
      std::vector<int32_t>& sequence = tokens[s];
      sequence.clear();
      for (int i = 0; i < 64; ++i) sequence.push_back(1000 + i);
      for (int i = 0; i < 64; ++i) sequence.push_back((salt % 20000) * 100000 + s * 64 + i);
      const PrefixHit hit = manager.FindCachedPrefix(sequence);
      hit_tokens += hit.num_cached_tokens;
      const auto started = manager.StartSequence(s, hit, prompt_length);
      if (!started.ok() || !started->has_value() ||
          !manager.CommitComputedTokens(s, sequence, prompt_length).ok()) {
        return false;
      }
    }
    for (int step = 0; step < decode_steps; ++step) {
      for (int s = 0; s < kNumSequences; ++s) {
        std::vector<int32_t>& sequence = tokens[s];
        sequence.push_back(7 + step);
        const int32_t length = static_cast<int32_t>(sequence.size());
        const auto grown = manager.AllocateSlots(s, length);
        if (!grown.ok() || !grown->has_value() ||
            !manager.CommitComputedTokens(s, sequence, length).ok()) {
          return false;
        }
      }
    }
    for (int s = 0; s < kNumSequences; ++s) {
      if (!manager.FreeSequence(s).ok()) return false;
    }
    return true;
  };
  for (auto _ : state) {
    if (!cycle()) {
      state.SkipWithError("a manager call failed or ran out of blocks");
      break;
    }
  }
  ReportPerOp(state, int64_t{kNumSequences} * (3 + 2 * decode_steps + 1));
  state.counters["hit_tokens_per_seq"] = benchmark::Counter(
      static_cast<double>(hit_tokens) / kNumSequences / static_cast<double>(state.iterations()));
}
BENCHMARK(BM_KvCacheManagerCycle)
    ->ArgNames({"caching", "decode"})
    ->Args({0, 32})
    ->Args({1, 32})
    ->Args({1, 128});

}  // namespace
}  // namespace ernie::kv

BENCHMARK_MAIN();
