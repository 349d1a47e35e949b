// ernie.v1.ChatInput (JSON strings) -> ChatRequest, with errors naming the field.
#pragma once

#include "absl/status/statusor.h"
#include "ernie/v1/tokenizer.pb.h"
#include "services/tokenizer/tokenizer.h"

namespace ernie::tokenizer {

// Deeper nesting of arrays and objects in any of ChatInput's JSON strings is
// refused (InvalidArgument). The gateway refuses request bodies nested deeper
// than its own limit of the same value, so whatever it forwards fits here.
inline constexpr int kMaxChatJsonNesting = 128;

absl::StatusOr<ChatRequest> ParseChatInput(const ernie::v1::ChatInput& input);

}  // namespace ernie::tokenizer
