// Builds tokenizer.model: a sentencepiece BPE model trained at run time on
// the corpus that ships in tools/make_model/corpus/, then laid out with the
// ids of ERNIE-4.5's real tokenizer (see ernie_special_tokens.h): digits at
// 3-12, byte pieces at 13-268, trained pieces from 269, unused filler pieces
// up to the sentence markers at 100272/100273 and the <mask:n> control
// pieces through 100294.
//
// Deterministic: one training thread, no input sampling or shuffling; the
// same corpus gives the same bytes (the --seed of a run does not enter: every
// generated model shares one tokenizer, like the real model family).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ernie::make_model {

struct TokenizerOptions {
  std::string corpus_dir;  // every *.txt in it, name order, one sentence a line
  // Pieces the BPE trainer is asked for (meta pieces included). A small
  // corpus yields fewer; whatever it yields starts at id 269.
  int trained_vocab_size = 8000;
};

// Sentences of every *.txt file in `corpus_dir`, in file-name order, empty
// lines dropped. NotFound when the folder is missing or holds no text.
absl::StatusOr<std::vector<std::string>> ReadCorpus(const std::string& corpus_dir);

// The serialized ModelProto of tokenizer.model.
absl::StatusOr<std::string> MakeTokenizerModel(const TokenizerOptions& options);

}  // namespace ernie::make_model
