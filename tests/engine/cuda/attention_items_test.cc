// WriteSequenceItems (engine/backend/cuda/attention_items.h): a sequence's
// new tokens as attention work items. Host logic only: runs without a device.
#include "engine/backend/cuda/attention_items.h"

#include <gtest/gtest.h>

#include <vector>

namespace ernie::testing {
namespace {

using cuda::AttentionWorkItem;
using cuda::WriteSequenceItems;

TEST(AttentionItemsTest, AChunkIsCutIntoRunsThatAllCarryItsFirstNewPosition) {
  // 20 new tokens after 37 cached, at tokens 5 .. 24 of the step, in items of 8.
  const SequenceSlice seq{.first_token = 5, .num_new_tokens = 20, .num_cached_tokens = 37};
  std::vector<AttentionWorkItem> items(20);
  ASSERT_EQ(WriteSequenceItems(seq, 8, /*block_table_offset=*/11, items.data()), 3);
  const int32_t begins[] = {5, 13, 21}, counts[] = {8, 8, 4};
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(items[i].token_begin, begins[i]);
    EXPECT_EQ(items[i].num_tokens, counts[i]);
    EXPECT_EQ(items[i].block_table_offset, 11);
    // Not the item's own first position (37 + 8 i): the attention may read
    // keys before this bound ahead of the kernel that writes the step's K
    // and V, and keys 37 .. 44 are this step's.
    EXPECT_EQ(items[i].first_new_position, 37);
  }
}

TEST(AttentionItemsTest, ADecodeIsOneItemOfOneToken) {
  const SequenceSlice seq{.first_token = 3, .num_new_tokens = 1, .num_cached_tokens = 191};
  AttentionWorkItem item;
  ASSERT_EQ(WriteSequenceItems(seq, 8, 0, &item), 1);
  EXPECT_EQ(item.token_begin, 3);
  EXPECT_EQ(item.num_tokens, 1);
  EXPECT_EQ(item.first_new_position, 191);
}

TEST(AttentionItemsTest, OneTokenItemsOfAChunkKeepTheChunksBound) {
  // A GQA group as wide as an item's rows gives items of one token: the
  // decode kernel takes them, and must not treat token 2's key as earlier.
  const SequenceSlice seq{.first_token = 0, .num_new_tokens = 3, .num_cached_tokens = 0};
  std::vector<AttentionWorkItem> items(3);
  ASSERT_EQ(WriteSequenceItems(seq, 1, 0, items.data()), 3);
  for (const AttentionWorkItem& item : items) EXPECT_EQ(item.first_new_position, 0);
}

}  // namespace
}  // namespace ernie::testing
