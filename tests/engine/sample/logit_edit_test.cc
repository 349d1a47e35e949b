// The logits processors as per-token edits (engine/sample/logit_edit.h), the
// form the device sampler applies: on random rows and parameters, the edits
// leave exactly (bit for bit) what the host's ApplyLogitsProcessors leaves.
#include "engine/sample/logit_edit.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "engine/sample/logits_processors.h"

namespace ernie {
namespace {

TEST(LogitEditTest, EditsGiveTheHostProcessorsBitForBit) {
  std::mt19937 gen(17);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_int_distribution<int32_t> token(-3, 200);  // some ids outside the row
  const int32_t vocab = 150;
  int edited_rows = 0;
  for (int trial = 0; trial < 400; ++trial) {
    SamplingParams p;
    if (trial % 2 == 0) p.repetition_penalty = 1.0f + static_cast<float>(trial % 7) * 0.13f;
    if (trial % 3 == 0) p.frequency_penalty = static_cast<float>(trial % 5) * 0.37f - 0.6f;
    if (trial % 5 == 0) p.presence_penalty = static_cast<float>(trial % 4) * 0.29f - 0.3f;
    if (trial % 4 == 1)
      for (int k = 0; k < 1 + trial % 6; ++k) p.logit_bias[token(gen)] = normal(gen);
    std::vector<int32_t> prompt_ids;
    for (int k = 0; k < trial % 40; ++k) prompt_ids.push_back(token(gen));
    const PromptTokenSet prompt(prompt_ids);
    OutputTokenCounts output;
    std::vector<int32_t> output_ids;
    for (int k = 0; k < trial % 60; ++k) output_ids.push_back(token(gen) % 30 + 3 * (k % 2));  // repeats
    for (int32_t id : output_ids) output.Add(id);
    std::vector<float> row(static_cast<size_t>(vocab));
    for (float& v : row) v = trial % 9 == 0 ? std::round(normal(gen)) : normal(gen);  // zeros and ties too
    row[0] = -0.0f;

    std::vector<float> host = row, edited = row, tracked = row;
    const PromptTokenSet* prompt_ptr = trial % 11 == 0 ? nullptr : &prompt;
    ApplyLogitsProcessors(p, {}, prompt_ptr, output, host);
    std::vector<LogitEdit> edits;
    AppendLogitEdits(p, prompt_ptr, output, vocab, &edits);
    ApplyLogitEdits(edits, LogitEditParamsOf(p), edited);
    // The same edits kept up to date token by token, as the engine keeps them.
    SampleLogitEdits incremental(p, prompt_ptr, vocab);
    for (int32_t id : output_ids) incremental.AddOutputToken(id);
    EXPECT_EQ(incremental.num_output_tokens(), output.num_tokens());
    EXPECT_EQ(incremental.edits().size(), edits.size()) << "trial " << trial;
    ApplyLogitEdits(incremental.edits(), incremental.params(), tracked);
    for (size_t i = 0; i < row.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(host[i]), std::bit_cast<uint32_t>(tracked[i]))
          << "trial " << trial << " token " << i << " (incremental): host " << host[i] << ", edits " << tracked[i];
    if (!HasLogitEdits(p)) {
      EXPECT_TRUE(edits.empty()) << "trial " << trial;
    }
    for (size_t i = 0; i < row.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(host[i]), std::bit_cast<uint32_t>(edited[i]))
          << "trial " << trial << " token " << i << ": host " << host[i] << ", edits " << edited[i];
    // One edit a distinct token, all inside the row.
    std::vector<int32_t> ids;
    for (const LogitEdit& e : edits) {
      EXPECT_GE(e.token_id, 0);
      EXPECT_LT(e.token_id, vocab);
      ids.push_back(e.token_id);
    }
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end()) << "trial " << trial;
    edited_rows += edits.empty() ? 0 : 1;
  }
  EXPECT_GT(edited_rows, 200);
}

TEST(LogitEditTest, OnlyWhatTheProcessorsTouch) {
  SamplingParams none;
  EXPECT_FALSE(HasLogitEdits(none));
  OutputTokenCounts output;
  output.Add(4);
  output.Add(4);
  output.Add(9);
  const std::vector<int32_t> prompt_ids = {1, 4, 7};
  const PromptTokenSet prompt(prompt_ids);
  std::vector<LogitEdit> edits;
  AppendLogitEdits(none, &prompt, output, 10, &edits);
  EXPECT_TRUE(edits.empty()) << "no processor, no edit";

  SamplingParams frequency{.frequency_penalty = 0.5f};
  AppendLogitEdits(frequency, &prompt, output, 10, &edits);
  ASSERT_EQ(edits.size(), 2u) << "the output's two tokens; the prompt is not read";
  for (const LogitEdit& e : edits) EXPECT_EQ(e.output_count, e.token_id == 4 ? 2 : 1);

  edits.clear();
  SamplingParams repetition{.repetition_penalty = 1.2f};
  repetition.logit_bias[7] = 2.0f;
  repetition.logit_bias[12] = 1.0f;  // outside a 10-token row: left out
  AppendLogitEdits(repetition, &prompt, output, 10, &edits);
  ASSERT_EQ(edits.size(), 4u);  // 4 and 9 (output), 7 (bias and prompt), 1 (prompt)
  for (const LogitEdit& e : edits) {
    EXPECT_EQ(e.has_bias, e.token_id == 7 ? 1 : 0) << e.token_id;
    EXPECT_EQ(e.in_prompt, e.token_id == 1 || e.token_id == 4 || e.token_id == 7 ? 1 : 0) << e.token_id;
  }
  EXPECT_EQ(LogitEditParamsOf(repetition).repetition_penalty, 1.2f);
}

}  // namespace
}  // namespace ernie
