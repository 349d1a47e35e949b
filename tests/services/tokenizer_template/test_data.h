// Reads the chat-template fixtures under tests/data/chat_templates.
#pragma once

#include <string>

#include "nlohmann/json.hpp"

namespace ernie::chat_template::testing {

std::string ReadFixture(const std::string& relative_path);
// Parsed with key order kept, as Python's json keeps it.
nlohmann::ordered_json ReadJsonFixture(const std::string& relative_path);
// The source text of templates/<name>.jinja.
std::string ReadTemplate(const std::string& name);

}  // namespace ernie::chat_template::testing
