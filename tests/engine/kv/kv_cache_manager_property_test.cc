// Random operation sequences against KvCacheManager, checked after every
// step against the manager's own invariants and against a shadow of the KV
// contents. Real K/V at position p depends on every token up to p, so the
// fake backend writes a fingerprint of tokens[0..p] into the slot the block
// table names: a block handed out while another sequence still reads it, or
// a prefix hit whose content or whose *prefix* differs, shows up as a
// mismatch.
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <optional>
#include <random>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "engine/kv/kv_cache_manager.h"
#include "gtest/gtest.h"

namespace ernie::kv {
namespace {

// Stand-in for the KV of position p: a fingerprint of tokens[0..p].
std::vector<uint64_t> PrefixFingerprints(const std::vector<int32_t>& tokens) {
  std::vector<uint64_t> fingerprints(tokens.size());
  uint64_t state = 0xcbf29ce484222325ULL;
  for (size_t p = 0; p < tokens.size(); ++p) {
    state = (state ^ static_cast<uint32_t>(tokens[p])) * 0x100000001b3ULL;
    fingerprints[p] = state;
  }
  return fingerprints;
}

struct LiveSequence {
  std::vector<int32_t> tokens;  // prompt, then generated ids
  int32_t num_computed = 0;     // mirrors the manager's count
};

// Everything an allocation that returns "can't" must leave untouched.
struct Snapshot {
  std::vector<int32_t> free_list;
  int32_t num_cached_blocks = 0;
  int32_t num_sequences = 0;
  int64_t num_started = 0;
  absl::flat_hash_map<SequenceId, std::vector<int32_t>> tables;

  friend bool operator==(const Snapshot&, const Snapshot&) = default;
};

struct Coverage {
  int64_t hit_tokens = 0;
  int64_t evictions = 0;
  int64_t cannot_fit = 0;
  int64_t tail_copies = 0;
  int64_t shared_forks = 0;
};

class RandomWorkload {
 public:
  RandomWorkload(uint32_t seed, Coverage& coverage) : rng_(seed), coverage_(coverage) {
    block_size_ = Uniform(1, 5);
    num_blocks_ = Uniform(3, 24);
    const bool caching = Uniform(0, 9) != 0;
    absl::StatusOr<KvCacheManager> manager = KvCacheManager::Create(
        {.num_blocks = num_blocks_, .block_size = block_size_, .enable_prefix_caching = caching});
    EXPECT_TRUE(manager.ok()) << manager.status();
    manager_.emplace(*std::move(manager));
    shadow_.assign(static_cast<size_t>(num_blocks_), std::vector<uint64_t>(block_size_, 0));
    // A few shared system prompts make prefix hits common.
    for (int i = 0; i < 3; ++i) {
      std::vector<int32_t> base(static_cast<size_t>(Uniform(1, 3 * block_size_ + 2)));
      for (int32_t& token : base) token = Uniform(1, 4);
      bases_.push_back(base);
    }
  }

  // Runs `num_ops` random operations, then frees every live sequence.
  void Run(int num_ops) {
    for (int op = 0; op < num_ops && !::testing::Test::HasFailure(); ++op) {
      SCOPED_TRACE(absl::StrFormat("operation %d", op));
      const int choice = Uniform(0, 11);
      if (choice < 3 || live_.empty()) {
        Start();
      } else if (choice < 9) {
        Step(PickLive());
      } else if (choice < 10) {
        Fork(PickLive());
      } else {
        Free(PickLive());
      }
      Verify();
    }
    while (!live_.empty() && !::testing::Test::HasFailure()) Free(live_.begin()->first);
    ASSERT_TRUE(manager_->CheckInvariants().ok()) << manager_->CheckInvariants();
    EXPECT_EQ(manager_->num_free_blocks(), num_blocks_);  // all free or cached-free
    for (int32_t block = 0; block < num_blocks_; ++block) {
      EXPECT_EQ(manager_->pool().ref_count(block), 0) << "block " << block;
    }
    coverage_.hit_tokens += manager_->stats().num_hit_tokens;
    coverage_.evictions += manager_->stats().num_evicted_blocks;
  }

 private:
  int32_t Uniform(int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng_);
  }

  SequenceId PickLive() {
    auto it = live_.begin();
    std::advance(it, Uniform(0, static_cast<int32_t>(live_.size()) - 1));
    return it->first;
  }

  Snapshot Take() const {
    Snapshot snapshot{.free_list = manager_->pool().FreeListInEvictionOrder(),
                      .num_cached_blocks = manager_->pool().num_cached_blocks(),
                      .num_sequences = manager_->num_sequences(),
                      .num_started = manager_->stats().num_started_sequences};
    for (const auto& [id, unused] : live_) {
      const absl::Span<const int32_t> table = *manager_->BlockTable(id);
      snapshot.tables[id] = std::vector<int32_t>(table.begin(), table.end());
    }
    return snapshot;
  }

  bool FitsPool(int64_t num_tokens) const {
    return (num_tokens + block_size_ - 1) / block_size_ <= num_blocks_;
  }

  // The fake backend: KV for positions [from, to) now holds those tokens.
  void WriteKv(SequenceId id, int32_t from, int32_t to) {
    const absl::Span<const int32_t> table = *manager_->BlockTable(id);
    const std::vector<uint64_t> kv = PrefixFingerprints(live_[id].tokens);
    for (int32_t p = from; p < to; ++p) shadow_[table[p / block_size_]][p % block_size_] = kv[p];
  }

  void Start() {
    const SequenceId id = next_id_++;
    std::vector<int32_t> prompt;
    if (Uniform(0, 3) != 0) prompt = bases_[Uniform(0, 2)];
    const int32_t suffix = Uniform(prompt.empty() ? 1 : 0, 3 * block_size_);
    for (int32_t i = 0; i < suffix; ++i) prompt.push_back(Uniform(1, 4));

    const PrefixHit hit = manager_->FindCachedPrefix(prompt);
    ASSERT_LT(hit.num_cached_tokens, static_cast<int32_t>(prompt.size()));
    // Chunked prefill: schedule part of the uncached tokens.
    const int32_t total =
        hit.num_cached_tokens + Uniform(1, static_cast<int32_t>(prompt.size()) - hit.num_cached_tokens);
    const Snapshot before = Take();
    const absl::StatusOr<std::optional<std::vector<int32_t>>> blocks =
        manager_->StartSequence(id, hit, total);
    if (!FitsPool(total)) {
      EXPECT_EQ(blocks.status().code(), absl::StatusCode::kResourceExhausted);
      EXPECT_EQ(Take(), before);
      return;
    }
    ASSERT_TRUE(blocks.ok()) << blocks.status();
    if (!blocks->has_value()) {
      ++coverage_.cannot_fit;
      EXPECT_EQ(Take(), before);
      return;
    }
    live_[id] = LiveSequence{.tokens = prompt, .num_computed = hit.num_cached_tokens};
    Compute(id, total);
  }

  // Computes positions [num_computed, target) and commits them.
  void Compute(SequenceId id, int32_t target) {
    LiveSequence& sequence = live_[id];
    WriteKv(id, sequence.num_computed, target);
    ASSERT_TRUE(manager_->CommitComputedTokens(id, sequence.tokens, target).ok());
    sequence.num_computed = target;
  }

  void Step(SequenceId id) {
    LiveSequence& sequence = live_[id];
    const int32_t num_tokens = static_cast<int32_t>(sequence.tokens.size());
    int32_t target = 0;
    if (sequence.num_computed < num_tokens) {  // prefill chunk or pending token
      target = sequence.num_computed + Uniform(1, num_tokens - sequence.num_computed);
    } else {  // decode: sample a token, then compute it
      sequence.tokens.push_back(Uniform(1, 4));
      target = num_tokens + 1;
    }
    const Snapshot before = Take();
    const absl::StatusOr<std::optional<std::vector<int32_t>>> grown =
        manager_->AllocateSlots(id, target);
    if (!FitsPool(target)) {  // hit the length limit: the request finishes
      EXPECT_EQ(grown.status().code(), absl::StatusCode::kResourceExhausted);
      Free(id);
      return;
    }
    ASSERT_TRUE(grown.ok()) << grown.status();
    if (!grown->has_value()) {
      ++coverage_.cannot_fit;
      EXPECT_EQ(Take(), before);
      Free(PickLive());  // preempt someone (maybe this one) by recomputation
      return;
    }
    Compute(id, target);
  }

  void Fork(SequenceId parent) {
    const SequenceId child = next_id_++;
    const Snapshot before = Take();
    const absl::StatusOr<std::optional<ForkResult>> fork = manager_->ForkSequence(parent, child);
    ASSERT_TRUE(fork.ok()) << fork.status();
    if (!fork->has_value()) {
      ++coverage_.cannot_fit;
      EXPECT_EQ(Take(), before);
      return;
    }
    const LiveSequence& source = live_[parent];
    LiveSequence copy{.tokens = std::vector<int32_t>(source.tokens.begin(),
                                                     source.tokens.begin() + source.num_computed),
                      .num_computed = source.num_computed};
    live_[child] = std::move(copy);
    if ((*fork)->tail_copy.has_value()) {
      const BlockCopy& tail = *(*fork)->tail_copy;
      for (int32_t row = 0; row < tail.num_tokens; ++row) {
        shadow_[tail.dst_block][row] = shadow_[tail.src_block][row];
      }
      ++coverage_.tail_copies;
    }
    if (live_[child].num_computed >= block_size_) ++coverage_.shared_forks;
  }

  void Free(SequenceId id) {
    ASSERT_TRUE(manager_->FreeSequence(id).ok());
    live_.erase(id);
  }

  void Verify() {
    const absl::Status invariants = manager_->CheckInvariants();
    ASSERT_TRUE(invariants.ok()) << invariants;
    for (const auto& [id, sequence] : live_) {
      ASSERT_EQ(*manager_->NumComputedTokens(id), sequence.num_computed);
      const absl::Span<const int32_t> table = *manager_->BlockTable(id);
      const std::vector<uint64_t> kv = PrefixFingerprints(sequence.tokens);
      for (int32_t p = 0; p < sequence.num_computed; ++p) {
        ASSERT_EQ(shadow_[table[p / block_size_]][p % block_size_], kv[p])
            << "sequence " << id << " position " << p << " block " << table[p / block_size_];
      }
    }
  }

  std::mt19937 rng_;
  Coverage& coverage_;
  int32_t block_size_ = 0;
  int32_t num_blocks_ = 0;
  std::optional<KvCacheManager> manager_;
  std::vector<std::vector<uint64_t>> shadow_;  // [num_blocks][block_size] fake KV
  std::vector<std::vector<int32_t>> bases_;   // shared prompt prefixes
  absl::flat_hash_map<SequenceId, LiveSequence> live_;
  SequenceId next_id_ = 1;
};

TEST(KvCacheManagerPropertyTest, RandomOperationSequencesKeepInvariants) {
  Coverage coverage;
  for (uint32_t seed = 1; seed <= 3000 && !HasFailure(); ++seed) {
    SCOPED_TRACE(absl::StrFormat("seed %d", seed));
    RandomWorkload workload(seed, coverage);
    workload.Run(60);
  }
  // The workload must actually reach the interesting paths.
  EXPECT_GT(coverage.hit_tokens, 0);
  EXPECT_GT(coverage.evictions, 0);
  EXPECT_GT(coverage.cannot_fit, 0);
  EXPECT_GT(coverage.tail_copies, 0);
  EXPECT_GT(coverage.shared_forks, 0);
  std::printf("coverage: %lld hit tokens, %lld evictions, %lld can't-fit, %lld tail copies\n",
              static_cast<long long>(coverage.hit_tokens), static_cast<long long>(coverage.evictions),
              static_cast<long long>(coverage.cannot_fit),
              static_cast<long long>(coverage.tail_copies));
}

}  // namespace
}  // namespace ernie::kv
