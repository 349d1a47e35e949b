#include "gateway/openai/context_length.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace ernie::gateway {

std::variant<int32_t, ApiError> ResolveMaxTokens(int64_t prompt_tokens, std::optional<int64_t> requested,
                                                 int32_t max_model_len, std::optional<int64_t> default_cap,
                                                 const std::string& prompt_field) {
  if (prompt_tokens <= 0) return BadField(prompt_field, absl::StrCat("The ", prompt_field, " is empty"));
  if (max_model_len > 0 && prompt_tokens >= max_model_len) {
    return BadField(prompt_field, absl::StrCat("This model's maximum context length is ", max_model_len,
                                               " tokens. However, your ", prompt_field, " has ", prompt_tokens,
                                               " tokens, which leaves no room for a completion. Please reduce "
                                               "the length of the ", prompt_field, "."));
  }
  if (requested) {
    if (max_model_len > 0 && prompt_tokens + *requested > max_model_len) {
      return BadField("max_tokens",
                      absl::StrCat("This model's maximum context length is ", max_model_len,
                                   " tokens. However, you requested ", prompt_tokens + *requested, " tokens (",
                                   prompt_tokens, " in the ", prompt_field, ", ", *requested,
                                   " in the completion). Please reduce the length of the ", prompt_field,
                                   " or completion."));
    }
    return static_cast<int32_t>(*requested);
  }
  int64_t budget = max_model_len > 0 ? max_model_len - prompt_tokens : std::numeric_limits<int32_t>::max();
  if (default_cap && *default_cap > 0) budget = std::min(budget, *default_cap);
  return static_cast<int32_t>(std::min<int64_t>(budget, std::numeric_limits<int32_t>::max()));
}

}  // namespace ernie::gateway
