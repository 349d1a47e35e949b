// Finds added-token strings in text, the way Hugging Face's slow tokenizers
// split on them before sentencepiece sees the text: scanning left to right,
// the earliest match wins and, among matches starting there, the longest.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ernie::tokenizer {

class AddedTokenSplitter {
 public:
  struct Segment {
    size_t begin = 0;  // byte range in the text
    size_t end = 0;
    int32_t token_id = -1;  // the added token's id, or -1 for plain text
  };

  explicit AddedTokenSplitter(const std::vector<std::pair<std::string, int32_t>>& tokens);

  // Splits `text` into plain-text segments and added-token matches, in
  // order, covering the text; no empty plain segments.
  std::vector<Segment> Split(std::string_view text) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
    int32_t token_id = -1;  // a token ends here
  };
  int32_t Child(int32_t node, unsigned char byte) const;

  std::vector<Node> nodes_;  // a byte trie; nodes_[0] is the root
};

}  // namespace ernie::tokenizer
