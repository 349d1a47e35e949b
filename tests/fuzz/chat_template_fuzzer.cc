// Fuzz target: the chat-template renderer (services/tokenizer/template):
// a template source parsed, then rendered with a context. Both come from
// the input, so the fuzzer explores the language (lexer, parser,
// evaluator, filters) and the data a request puts in the context.
//
// Input: the template source, then optionally a NUL byte and a JSON object
// read like a chat request's fields: "messages", "tools",
// "add_generation_prompt", and every other key as a chat_template_kwarg.
// Without one (or when it is not an object) a small fixed conversation is
// the context. The seeds are tests/data/chat_templates' real templates, each
// with one of its test conversations.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "services/tokenizer/template/chat_template.h"

namespace {

using ernie::chat_template::BuildChatContext;
using ernie::chat_template::ChatContextInput;
using ernie::chat_template::ChatTemplate;
using OrderedJson = nlohmann::ordered_json;

ChatContextInput ContextFrom(std::string_view json_text) {
  ChatContextInput input;
  input.bos_token = "<s>";
  input.eos_token = "</s>";
  input.other_special_tokens = {{"cls_token", "<|begin_of_sentence|>"}, {"sep_token", "<|end_of_sentence|>"}};
  OrderedJson fields = OrderedJson::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (fields.is_discarded() || !fields.is_object()) {
    input.messages = OrderedJson::array({{{"role", "system"}, {"content", "Sys."}},
                                         {{"role", "user"}, {"content", "Hi"}},
                                         {{"role", "assistant"}, {"content", "Hello!"}},
                                         {{"role", "user"}, {"content", "Tell me more."}}});
    return input;
  }
  for (auto& [key, value] : fields.items()) {
    if (key == "messages") {
      input.messages = value;
    } else if (key == "tools") {
      input.tools = value;
    } else if (key == "add_generation_prompt") {
      input.add_generation_prompt = value.is_boolean() && value.get<bool>();
    } else if (key != "documents") {
      input.extra_kwargs[key] = value;
    }
  }
  return input;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view source = input.substr(0, nul);
  const std::string_view context_text = nul == std::string_view::npos ? "" : input.substr(nul + 1);

  auto parsed = ChatTemplate::Parse(source);
  if (!parsed.ok()) {
    ERNIE_FUZZ_CHECK(!parsed.status().message().empty(), "a parse error says why");
    return 0;
  }
  auto context = BuildChatContext(ContextFrom(context_text));
  if (!context.ok()) return 0;
  auto rendered = parsed->Render(*context);
  if (!rendered.ok()) ERNIE_FUZZ_CHECK(!rendered.status().message().empty(), "a render error says why");
  return 0;
}
