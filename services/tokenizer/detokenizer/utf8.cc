#include "services/tokenizer/detokenizer/utf8.h"

#include <cstdint>

namespace ernie::tokenizer {
namespace {

bool IsContinuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

}  // namespace

int Utf8SequenceLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 0;
}

size_t ValidUtf8CharLength(std::string_view bytes) {
  if (bytes.empty()) return 0;
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(bytes[i]); };
  const int length = Utf8SequenceLength(byte(0));
  if (length == 0 || bytes.size() < static_cast<size_t>(length)) return 0;
  if (length == 1) return 1;
  uint32_t code_point = byte(0) & (0x7F >> length);
  for (int i = 1; i < length; ++i) {
    if (!IsContinuation(byte(i))) return 0;
    code_point = (code_point << 6) | (byte(i) & 0x3F);
  }
  static constexpr uint32_t kMinimum[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (code_point < kMinimum[length]) return 0;  // overlong
  if (code_point >= 0xD800 && code_point < 0xE000) return 0;
  if (code_point > 0x10FFFF) return 0;
  return static_cast<size_t>(length);
}

bool CouldCompleteUtf8Char(std::string_view bytes) {
  if (bytes.empty()) return true;
  const auto lead = static_cast<unsigned char>(bytes[0]);
  if (Utf8SequenceLength(lead) < 2 || lead == 0xC0 || lead == 0xC1 || lead > 0xF4) return false;
  for (size_t i = 1; i < bytes.size(); ++i) {
    if (!IsContinuation(static_cast<unsigned char>(bytes[i]))) return false;
  }
  if (bytes.size() < 2) return true;
  const auto second = static_cast<unsigned char>(bytes[1]);
  if (lead == 0xE0 && second < 0xA0) return false;  // overlong
  if (lead == 0xED && second >= 0xA0) return false;  // surrogate
  if (lead == 0xF0 && second < 0x90) return false;  // overlong
  if (lead == 0xF4 && second >= 0x90) return false;  // past U+10FFFF
  return true;
}

size_t FindInvalidUtf8(std::string_view text) {
  size_t offset = 0;
  while (offset < text.size()) {
    if (static_cast<unsigned char>(text[offset]) < 0x80) {
      ++offset;
      continue;
    }
    const size_t length = ValidUtf8CharLength(text.substr(offset));
    if (length == 0) return offset;
    offset += length;
  }
  return std::string_view::npos;
}

}  // namespace ernie::tokenizer
