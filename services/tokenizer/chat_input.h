// ernie.v1.ChatInput (JSON strings) -> ChatRequest, with errors naming the field.
#pragma once

#include "absl/status/statusor.h"
#include "ernie/v1/tokenizer.pb.h"
#include "services/tokenizer/tokenizer.h"

namespace ernie::tokenizer {

absl::StatusOr<ChatRequest> ParseChatInput(const ernie::v1::ChatInput& input);

}  // namespace ernie::tokenizer
