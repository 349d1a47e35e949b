// ernie-tokenize --model DIR (--text T | --ids 1,2,3 | --messages FILE_OR_JSON
//   [--tools FILE_OR_JSON] [--no-generation-prompt] [--template-kwargs JSON])
//   [--render] [--parse-special] [--skip-special]
// Prints one JSON object; errors go to stderr with a non-zero exit.
#include <boost/program_options.hpp>
#include <iostream>

#include "services/tokenizer/tokenize_cli.h"

namespace {

namespace po = boost::program_options;

int Run(int argc, char** argv) {
  std::string model_dir;
  ernie::tokenizer::TokenizeCommand command;
  po::options_description flags("ernie-tokenize options");
  flags.add_options()("help", "show this help")("model", po::value(&model_dir)->required(), "model directory")(
      "text", po::value<std::string>(), "text to encode")("ids", po::value<std::string>(), "ids to decode: 1,2,3")(
      "messages", po::value<std::string>(), "chat messages: a JSON array or a file")(
      "tools", po::value<std::string>(), "tool schemas: a JSON array or a file")(
      "template-kwargs", po::value<std::string>(), "extra template variables: a JSON object")(
      "no-generation-prompt", po::bool_switch(), "render without the assistant prompt")(
      "render", po::bool_switch(&command.render), "with --messages: text is the rendered prompt")(
      "parse-special", po::bool_switch(&command.parse_special), "special-token strings in --text become their ids")(
      "skip-special", po::bool_switch(&command.skip_special), "decode without special tokens");
  po::variables_map values;
  try {
    po::store(po::parse_command_line(argc, argv, flags), values);
    if (values.count("help") != 0u) {
      std::cout << flags << "\n";
      return 0;
    }
    po::notify(values);
  } catch (const po::error& error) {
    std::cerr << "ernie-tokenize: " << error.what() << "\n";
    return 2;
  }
  if (values.count("text") != 0u) command.text = values["text"].as<std::string>();
  if (values.count("messages") != 0u) command.messages = values["messages"].as<std::string>();
  if (values.count("tools") != 0u) command.tools = values["tools"].as<std::string>();
  if (values.count("template-kwargs") != 0u) command.template_kwargs = values["template-kwargs"].as<std::string>();
  command.add_generation_prompt = !values["no-generation-prompt"].as<bool>();
  if (values.count("ids") != 0u) {
    auto ids = ernie::tokenizer::ParseIdList(values["ids"].as<std::string>());
    if (!ids.ok()) {
      std::cerr << "ernie-tokenize: " << ids.status().message() << "\n";
      return 2;
    }
    command.ids = *std::move(ids);
  }
  auto tokenizer = ernie::tokenizer::Tokenizer::Load(model_dir);
  if (!tokenizer.ok()) {
    std::cerr << "ernie-tokenize: " << tokenizer.status().message() << "\n";
    return 1;
  }
  auto result = ernie::tokenizer::RunTokenize(**tokenizer, command);
  if (!result.ok()) {
    std::cerr << "ernie-tokenize: " << result.status().message() << "\n";
    return 1;
  }
  std::cout << result->dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& error) {
    std::cerr << "ernie-tokenize: " << error.what() << "\n";
    return 1;
  }
}
