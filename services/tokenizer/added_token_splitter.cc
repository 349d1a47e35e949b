#include "services/tokenizer/added_token_splitter.h"

#include <algorithm>

namespace ernie::tokenizer {

AddedTokenSplitter::AddedTokenSplitter(const std::vector<std::pair<std::string, int32_t>>& tokens) : nodes_(1) {
  for (const auto& [content, id] : tokens) {
    if (content.empty()) continue;
    int32_t node = 0;
    for (char c : content) {
      const auto byte = static_cast<unsigned char>(c);
      int32_t next = Child(node, byte);
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_.emplace_back();
        auto& children = nodes_[static_cast<size_t>(node)].children;
        children.insert(std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{0})),
                        {byte, next});
      }
      node = next;
    }
    nodes_[static_cast<size_t>(node)].token_id = id;
  }
}

int32_t AddedTokenSplitter::Child(int32_t node, unsigned char byte) const {
  const auto& children = nodes_[static_cast<size_t>(node)].children;
  auto it = std::lower_bound(children.begin(), children.end(), std::make_pair(byte, int32_t{0}));
  return it != children.end() && it->first == byte ? it->second : -1;
}

std::vector<AddedTokenSplitter::Segment> AddedTokenSplitter::Split(std::string_view text) const {
  std::vector<Segment> segments;
  size_t plain_begin = 0;
  size_t position = 0;
  while (position < text.size()) {
    // Longest token starting at `position`.
    int32_t node = 0;
    int32_t matched_id = -1;
    size_t matched_end = 0;
    for (size_t i = position; i < text.size(); ++i) {
      node = Child(node, static_cast<unsigned char>(text[i]));
      if (node < 0) break;
      if (nodes_[static_cast<size_t>(node)].token_id >= 0) {
        matched_id = nodes_[static_cast<size_t>(node)].token_id;
        matched_end = i + 1;
      }
    }
    if (matched_id < 0) {
      ++position;
      continue;
    }
    if (plain_begin < position) segments.push_back({plain_begin, position, -1});
    segments.push_back({position, matched_end, matched_id});
    position = plain_begin = matched_end;
  }
  if (plain_begin < text.size()) segments.push_back({plain_begin, text.size(), -1});
  return segments;
}

}  // namespace ernie::tokenizer
