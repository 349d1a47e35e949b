#include "tools/make_model/ernie_special_tokens.h"

#include "absl/strings/str_cat.h"

namespace ernie::make_model {
namespace {

// Added tokens past the sentencepiece model, starting at id 100295.
// Ids 100295 (<|IMAGE_PLACEHOLDER|>), 101305 (<|IMAGE_START|>) and 101306
// (<|IMAGE_END|>) are confirmed by public code that reads the real tokenizer;
// the ones in between follow the order of the release's
// additional_special_tokens list. 101304 is left unassigned (its real token
// is unknown).
std::vector<SpecialToken> ExtraAddedTokens() {
  std::vector<SpecialToken> out;
  int id = kSentencePieceVocabSize;
  out.push_back({id++, "<|IMAGE_PLACEHOLDER|>", false});
  out.push_back({id++, "<|AUDIO_PLACEHOLDER|>", false});
  for (int n = 0; n < kNumLocTokens; ++n) out.push_back({id++, absl::StrCat("<|LOC_", n, "|>"), false});
  for (const char* name : {"<|LOC_BEGIN|>", "<|LOC_END|>", "<|LOC_SEP|>", "<|CROP_COL_SEP|>",
                           "<|CROP_ROW_SEP|>", "<|CROP_IMAGE_SEP|>"}) {
    out.push_back({id++, name, false});
  }
  id = 101305;
  for (const char* name : {"<|IMAGE_START|>", "<|IMAGE_END|>", "<|VIDEO_START|>", "<|VIDEO_END|>"}) {
    out.push_back({id++, name, false});
  }
  return out;
}

}  // namespace

std::string MaskToken(int n) { return absl::StrCat("<mask:", n, ">"); }

std::vector<SpecialToken> SentencePieceControlTokens() {
  std::vector<SpecialToken> out;
  out.push_back({kEndOfSentenceId, "<|end_of_sentence|>", true});
  out.push_back({kBeginOfSentenceId, "<|begin_of_sentence|>", true});
  for (int n = 0; n < kNumMaskTokens; ++n) out.push_back({kFirstMaskId + n, MaskToken(n), true});
  return out;
}

std::vector<SpecialToken> AddedTokensDecoder() {
  std::vector<SpecialToken> out = {{kUnkId, "<unk>", true},
                                   {kBosId, "<s>", true},
                                   {kEosId, "</s>", true},
                                   {kEndOfSentenceId, "<|end_of_sentence|>", true},
                                   {kBeginOfSentenceId, "<|begin_of_sentence|>", true}};
  for (int n : {1, 4, 5, 6, 7}) out.push_back({kFirstMaskId + n, MaskToken(n), true});
  for (SpecialToken& token : ExtraAddedTokens()) out.push_back(std::move(token));
  return out;
}

std::vector<std::string> AdditionalSpecialTokens() {
  std::vector<std::string> out;
  for (int n : {4, 5, 6, 7}) out.push_back(MaskToken(n));
  for (const SpecialToken& token : ExtraAddedTokens()) out.push_back(token.content);
  return out;
}

}  // namespace ernie::make_model
