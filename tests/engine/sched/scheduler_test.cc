// The scheduler driven step by step with a fake model step (every scheduled
// chunk is "computed" at once and each finished prompt or decode appends one
// token), with the expected timeline written next to each assertion.
#include "engine/sched/scheduler.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>

namespace ernie::sched {
namespace {

class SchedulerTest : public ::testing::Test {
 protected:
  void Init(int32_t num_blocks, int32_t block_size, SchedulerConfig config) {
    auto kv = kv::KvCacheManager::Create({.num_blocks = num_blocks, .block_size = block_size});
    ASSERT_TRUE(kv.ok()) << kv.status();
    kv_ = std::make_unique<kv::KvCacheManager>(std::move(*kv));
    sched_ = std::make_unique<Scheduler>(config, kv_.get());
  }

  Sequence* NewSeq(int prompt_len, int max_tokens, int priority = 0, int salt = 0) {
    auto s = std::make_unique<Sequence>();
    s->id = next_id_++;
    s->priority = priority;
    s->arrival = next_arrival_++;
    for (int i = 0; i < prompt_len; ++i) s->tokens.push_back(3 + (i * 13 + salt * 101) % 97);
    s->num_prompt_tokens = prompt_len;
    s->max_total_tokens = prompt_len + max_tokens;
    seqs_.push_back(std::move(s));
    return seqs_.back().get();
  }

  // The fake model step: commit every chunk, append a token where logits come out,
  // finish sequences that reached max_total_tokens.
  StepPlan Step() {
    StepPlan plan = sched_->Schedule();
    for (const auto& c : plan.chunks) {
      Sequence* s = c.seq;
      s->num_computed_tokens += c.num_new_tokens;
      EXPECT_TRUE(kv_->CommitComputedTokens(s->id, s->tokens, s->num_computed_tokens).ok());
      if (c.produces_logits) s->tokens.push_back(5);
    }
    for (const auto& c : plan.chunks)
      if (c.seq->num_tokens() >= c.seq->max_total_tokens) sched_->Remove(c.seq);
    EXPECT_TRUE(kv_->CheckInvariants().ok());
    return plan;
  }

  std::unique_ptr<kv::KvCacheManager> kv_;
  std::unique_ptr<Scheduler> sched_;
  std::vector<std::unique_ptr<Sequence>> seqs_;
  kv::SequenceId next_id_ = 1;
  uint64_t next_arrival_ = 1;
};

TEST_F(SchedulerTest, ChunkedPrefillNeverStarvesDecodes) {
  Init(64, 4, {.max_num_seqs = 8, .max_num_batched_tokens = 8});
  Sequence* a = NewSeq(3, 10);
  ASSERT_TRUE(sched_->Add(a).ok());
  // step 1: a prefills 3 tokens.
  StepPlan p = Step();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].num_new_tokens, 3);
  EXPECT_TRUE(p.chunks[0].produces_logits);
  Sequence* b = NewSeq(20, 4);
  ASSERT_TRUE(sched_->Add(b).ok());
  // step 2: a decodes 1, b gets the remaining budget 7 of its 20-token prompt.
  p = Step();
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.chunks[0].seq, a);
  EXPECT_EQ(p.chunks[0].num_new_tokens, 1);
  EXPECT_EQ(p.chunks[1].seq, b);
  EXPECT_EQ(p.chunks[1].num_new_tokens, 7);
  EXPECT_FALSE(p.chunks[1].produces_logits);
  // steps 3, 4: a decodes each step while b continues 7, then 6 (its last chunk).
  p = Step();
  EXPECT_EQ(p.chunks[0].num_new_tokens, 1);
  EXPECT_EQ(p.chunks[1].num_new_tokens, 7);
  p = Step();
  EXPECT_EQ(p.chunks[1].num_new_tokens, 6);
  EXPECT_TRUE(p.chunks[1].produces_logits);
  EXPECT_EQ(p.num_tokens, 7);
}

TEST_F(SchedulerTest, BudgetAndMaxNumSeqsLimitAdmission) {
  Init(64, 4, {.max_num_seqs = 2, .max_num_batched_tokens = 100});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(sched_->Add(NewSeq(5, 3)).ok());
  StepPlan p = Step();
  EXPECT_EQ(p.chunks.size(), 2u);  // max_num_seqs
  EXPECT_EQ(sched_->num_waiting(), 1);
}

TEST_F(SchedulerTest, PriorityThenFifo) {
  Init(64, 4, {.max_num_seqs = 1, .max_num_batched_tokens = 100});
  Sequence* low = NewSeq(4, 1, /*priority=*/5);
  Sequence* high1 = NewSeq(4, 1, /*priority=*/0);
  Sequence* high2 = NewSeq(4, 1, /*priority=*/0);
  for (Sequence* s : {low, high2, high1}) ASSERT_TRUE(sched_->Add(s).ok());
  EXPECT_EQ(Step().chunks[0].seq, high1);  // arrived before high2
  EXPECT_EQ(Step().chunks[0].seq, high2);
  EXPECT_EQ(Step().chunks[0].seq, low);
}

TEST_F(SchedulerTest, PreemptsLatestAdmittedWhenBlocksRunOut) {
  // 4 blocks of 2 tokens = 8 slots. a and b each prefill 3 tokens (2 blocks each).
  Init(4, 2, {.max_num_seqs = 4, .max_num_batched_tokens = 16});
  Sequence* a = NewSeq(3, 5);
  Sequence* b = NewSeq(3, 5);
  ASSERT_TRUE(sched_->Add(a).ok());
  ASSERT_TRUE(sched_->Add(b).ok());
  StepPlan p = Step();
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(kv_->num_free_blocks(), 0);
  // step 2: both decode their 4th token into their 2nd block (fits).
  p = Step();
  EXPECT_EQ(p.chunks.size(), 2u);
  EXPECT_TRUE(p.preempted.empty());
  // step 3: a's 5th token needs a 3rd block: b (admitted later) is preempted.
  p = Step();
  ASSERT_EQ(p.preempted.size(), 1u);
  EXPECT_EQ(p.preempted[0], b);
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq, a);
  EXPECT_EQ(b->status, SequenceStatus::kWaiting);
  EXPECT_EQ(b->num_computed_tokens, 0);
  EXPECT_EQ(sched_->num_preemptions(), 1);
  // a runs to completion, then b is recomputed (its full blocks may come from the cache).
  for (int i = 0; i < 20 && a->status != SequenceStatus::kFinished; ++i) Step();
  EXPECT_EQ(a->status, SequenceStatus::kFinished);
  for (int i = 0; i < 20 && b->status != SequenceStatus::kFinished; ++i) Step();
  EXPECT_EQ(b->status, SequenceStatus::kFinished);
  EXPECT_EQ(b->num_tokens(), 8);
  EXPECT_EQ(kv_->num_free_blocks(), 4);
}

TEST_F(SchedulerTest, RefusesWhatCanNeverFitAndBoundsTheQueue) {
  Init(4, 2, {.max_num_seqs = 4, .max_num_batched_tokens = 16, .max_waiting_sequences = 2});
  auto s = sched_->Add(NewSeq(5, 4));  // 9 tokens > 8 slots
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("pool holds 8"), std::string::npos);
  ASSERT_TRUE(sched_->Add(NewSeq(2, 1)).ok());
  ASSERT_TRUE(sched_->Add(NewSeq(2, 1)).ok());
  EXPECT_EQ(sched_->Add(NewSeq(2, 1)).code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(SchedulerTest, PrefixCacheHitSkipsComputedBlocks) {
  Init(64, 4, {.max_num_seqs = 4, .max_num_batched_tokens = 64});
  Sequence* a = NewSeq(10, 1, 0, /*salt=*/7);
  ASSERT_TRUE(sched_->Add(a).ok());
  Step();  // a computes 10 tokens, commits 2 full blocks, finishes
  Sequence* b = NewSeq(10, 1, 0, /*salt=*/7);  // same prompt
  ASSERT_TRUE(sched_->Add(b).ok());
  StepPlan p = Step();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(b->num_cached_prompt_tokens, 8);
  EXPECT_EQ(p.chunks[0].num_new_tokens, 2);
}

TEST_F(SchedulerTest, RemoveAtAnyPointReturnsEveryBlock) {
  Init(16, 4, {.max_num_seqs = 4, .max_num_batched_tokens = 6});
  Sequence* a = NewSeq(12, 8);
  Sequence* b = NewSeq(3, 8);
  ASSERT_TRUE(sched_->Add(a).ok());
  ASSERT_TRUE(sched_->Add(b).ok());
  Step();                  // a mid-prefill
  sched_->Remove(a);       // abort while prefilling
  Step();
  sched_->Remove(b);       // abort while decoding
  Sequence* c = NewSeq(3, 2);
  ASSERT_TRUE(sched_->Add(c).ok());
  sched_->Remove(c);       // abort while waiting
  EXPECT_EQ(sched_->num_running() + sched_->num_waiting(), 0);
  EXPECT_EQ(kv_->num_free_blocks(), 16);
}

// Thousands of random operations: invariants hold and the pool is full again.
TEST_F(SchedulerTest, RandomOperationsKeepInvariants) {
  std::mt19937 rng(1234);
  for (int round = 0; round < 20; ++round) {
    Init(6 + static_cast<int32_t>(rng() % 20), 1 + static_cast<int32_t>(rng() % 5),
         {.max_num_seqs = 1 + static_cast<int32_t>(rng() % 6), .max_num_batched_tokens = 1 + static_cast<int32_t>(rng() % 24)});
    const int32_t capacity = kv_->num_blocks() * kv_->block_size();
    std::vector<Sequence*> live;
    for (int op = 0; op < 300; ++op) {
      const int r = static_cast<int>(rng() % 10);
      if (r < 3) {
        const int prompt = 1 + static_cast<int>(rng() % std::max(1, capacity - 1));
        const int max_tokens = 1 + static_cast<int>(rng() % 6);
        Sequence* s = NewSeq(prompt, max_tokens, static_cast<int>(rng() % 3), static_cast<int>(rng() % 4));
        if (sched_->Add(s).ok()) live.push_back(s);
      } else if (r < 4 && !live.empty()) {
        const size_t k = rng() % live.size();
        sched_->Remove(live[k]);
        live.erase(live.begin() + static_cast<long>(k));
      } else {
        Step();
        live.erase(std::remove_if(live.begin(), live.end(),
                                  [](Sequence* s) { return s->status == SequenceStatus::kFinished; }),
                   live.end());
      }
      ASSERT_TRUE(kv_->CheckInvariants().ok());
      ASSERT_LE(sched_->num_running(), sched_->config().max_num_seqs);
    }
    // Drain: everything admitted eventually finishes.
    for (int i = 0; i < 5000 && sched_->num_running() + sched_->num_waiting() > 0; ++i) Step();
    EXPECT_EQ(sched_->num_running() + sched_->num_waiting(), 0);
    EXPECT_EQ(kv_->num_free_blocks(), kv_->num_blocks());
  }
}

// Overlapped steps: a decode's next input may be a token still on the
// device (num_pending_tokens). The scheduler plans with it, skips a
// sequence whose pending token is its last, and admits a preempted one only
// once its token is read.
TEST_F(SchedulerTest, PendingTokensArePlannedWithAndHoldBackReadmission) {
  Init(64, 4, {.max_num_seqs = 4, .max_num_batched_tokens = 16});
  Sequence* a = NewSeq(3, 2);
  ASSERT_TRUE(sched_->Add(a).ok());
  StepPlan plan = sched_->Schedule();  // a's prompt, which samples
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_TRUE(plan.chunks[0].produces_logits);
  a->num_computed_tokens = 3;
  a->num_pending_tokens = 1;  // launched, not read
  plan = sched_->Schedule();  // the next step, planned before the token is read
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(plan.chunks[0].num_new_tokens, 1);  // the pending token's position
  EXPECT_TRUE(plan.chunks[0].produces_logits);
  // Both launched: the second pending token (5 = 3 + 2) is a's last.
  a->tokens.push_back(7);
  a->num_computed_tokens = 4;
  EXPECT_EQ(a->num_planned_tokens(), 5);
  EXPECT_TRUE(sched_->Schedule().chunks.empty());

  // A preempted sequence with a pending token waits for it.
  Init(3, 4, {.max_num_seqs = 4, .max_num_batched_tokens = 16});
  Sequence* b = NewSeq(4, 8);
  Sequence* c = NewSeq(4, 8);
  ASSERT_TRUE(sched_->Add(b).ok());
  ASSERT_TRUE(sched_->Add(c).ok());
  plan = sched_->Schedule();  // both prompts: 2 blocks of 3
  ASSERT_EQ(plan.chunks.size(), 2u);
  for (Sequence* s : {b, c}) {
    s->num_computed_tokens = 4;
    s->num_pending_tokens = 1;
  }
  plan = sched_->Schedule();  // b takes the last block; c, the latest admitted, is preempted
  ASSERT_EQ(plan.preempted.size(), 1u);
  EXPECT_EQ(plan.preempted[0], c);
  EXPECT_EQ(c->num_computed_tokens, 0);
  sched_->Remove(b);  // room again, but c's token is still unread
  EXPECT_TRUE(sched_->Schedule().chunks.empty());
  c->tokens.push_back(9);  // read
  c->num_pending_tokens = 0;
  plan = sched_->Schedule();
  ASSERT_EQ(plan.chunks.size(), 1u);
  EXPECT_EQ(plan.chunks[0].seq, c);
  EXPECT_EQ(plan.chunks[0].num_new_tokens, 5);  // recomputes prompt and token
}

}  // namespace
}  // namespace ernie::sched
