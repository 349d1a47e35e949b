// The special tokens of ERNIE-4.5's tokenizer and the ids they have in the
// released checkpoints, so a generated tokenizer lines up with a real one.
//
// Layout of the real release (see the report in tools/make_model/README.md
// for where each value comes from):
//   tokenizer.model (sentencepiece, 100295 pieces):
//     0 <unk>, 1 <s>, 2 </s>, 3-12 "0".."9", 13-268 <0x00>..<0xFF>,
//     normal pieces, 100272 <|end_of_sentence|>, 100273 <|begin_of_sentence|>,
//     100274.. <mask:0>.. (control pieces up to 100294)
//   added tokens (tokenizer_config.json / added_tokens.json only, ids past
//   the sentencepiece model): 100295 <|IMAGE_PLACEHOLDER|>,
//     100296 <|AUDIO_PLACEHOLDER|>, 100297-101297 <|LOC_0|>..<|LOC_1000|>, ...
#pragma once

#include <string>
#include <vector>

namespace ernie::make_model {

inline constexpr int kUnkId = 0;  // also the pad token
inline constexpr int kBosId = 1;
inline constexpr int kEosId = 2;
inline constexpr int kFirstDigitId = 3;     // "0".."9" at 3..12
inline constexpr int kFirstBytePieceId = 13;  // <0x00>..<0xFF> at 13..268
inline constexpr int kFirstNormalPieceId = 269;
inline constexpr int kEndOfSentenceId = 100272;
inline constexpr int kBeginOfSentenceId = 100273;
inline constexpr int kFirstMaskId = 100274;  // <mask:0>; <mask:n> = kFirstMaskId + n
inline constexpr int kNumMaskTokens = 21;    // <mask:0>..<mask:20>, through id 100294
inline constexpr int kSentencePieceVocabSize = 100295;  // pieces in tokenizer.model
inline constexpr int kNumLocTokens = 1001;              // <|LOC_0|>..<|LOC_1000|>

struct SpecialToken {
  int id = 0;
  std::string content;
  // True: a control (or unknown) piece of tokenizer.model itself. False: an
  // added token that exists only in the Hugging Face JSON files.
  bool in_sentencepiece = false;
};

// Control pieces placed at the end of tokenizer.model, in id order
// (<|end_of_sentence|>, <|begin_of_sentence|>, <mask:0>..<mask:20>).
std::vector<SpecialToken> SentencePieceControlTokens();

// Every token listed in tokenizer_config.json's added_tokens_decoder, in id
// order: <unk>, <s>, </s>, the sentence markers, <mask:1>, <mask:4>..<mask:7>,
// and every added token past the sentencepiece model.
std::vector<SpecialToken> AddedTokensDecoder();

// The ones the release lists as additional_special_tokens (everything in
// AddedTokensDecoder() that is not bos/eos/unk/pad/cls/sep/mask).
std::vector<std::string> AdditionalSpecialTokens();

std::string MaskToken(int n);  // "<mask:n>"

}  // namespace ernie::make_model
