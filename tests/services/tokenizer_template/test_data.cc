#include "tests/services/tokenizer_template/test_data.h"

#include <fstream>
#include <sstream>
#include <stdexcept>

namespace ernie::chat_template::testing {

std::string ReadFixture(const std::string& relative_path) {
  const std::string path = std::string(ERNIE_TEST_DATA_DIR) + "/chat_templates/" + relative_path;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open fixture " + path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::ordered_json ReadJsonFixture(const std::string& relative_path) {
  return nlohmann::ordered_json::parse(ReadFixture(relative_path));
}

std::string ReadTemplate(const std::string& name) { return ReadFixture("templates/" + name + ".jinja"); }

}  // namespace ernie::chat_template::testing
