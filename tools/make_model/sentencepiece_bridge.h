// The only place ernie-make-model touches sentencepiece's C++ API.
//
// Debian's sentencepiece headers declare `namespace absl { using
// std::string_view; }`, which collides with Debian abseil's own
// absl::string_view class: a translation unit cannot include both. So this
// header and its .cc use plain std types only (no absl), and callers wrap
// the results into absl::Status.
#pragma once

#include <string>
#include <vector>

namespace ernie::make_model {

// Trains a model with sentencepiece's trainer. `trainer_args` is the
// spm_train flag string. On success fills `serialized_model` and returns
// true; on failure returns false with the trainer's message (and the tail
// of its log, which is otherwise swallowed) in `error`.
bool TrainSentencePiece(const std::string& trainer_args, const std::vector<std::string>& sentences,
                        std::string* serialized_model, std::string* error);

// Loads `serialized_model` in sentencepiece's processor. Returns false with
// `error` set when it does not load; sets `piece_count` on success.
bool LoadSentencePiece(const std::string& serialized_model, int* piece_count, std::string* error);

}  // namespace ernie::make_model
