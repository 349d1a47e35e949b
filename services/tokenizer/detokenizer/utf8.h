// Strict UTF-8, decided the way sentencepiece decides it: a character is
// valid when its lead byte, continuation bytes, minimal length and code
// point (no surrogates, at most U+10FFFF) all check out; an invalid byte
// stands alone and becomes U+FFFD.
#pragma once

#include <cstddef>
#include <string_view>

namespace ernie::tokenizer {

inline constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

// How many bytes the character starting with `lead` claims: 1 for ASCII,
// 2-4 for a multi-byte lead, 0 for a byte that cannot start a character.
int Utf8SequenceLength(unsigned char lead);

// Length of the valid character at the start of `bytes`, or 0 when those
// bytes do not begin with one (including when they are cut short).
size_t ValidUtf8CharLength(std::string_view bytes);

// For `bytes` shorter than the character their lead byte claims: whether
// some continuation could still make them a valid character (false once a
// byte is not a continuation or the code point is already out of range).
bool CouldCompleteUtf8Char(std::string_view bytes);

// Offset of the first byte that is not part of a valid character, or npos
// when all of `text` is valid UTF-8.
size_t FindInvalidUtf8(std::string_view text);

}  // namespace ernie::tokenizer
