#include "tools/make_model/hf_config_files.h"

#include <cmath>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"
#include "tools/make_model/ernie_special_tokens.h"

namespace ernie::make_model {
namespace {

using Json = nlohmann::ordered_json;

// 500000.0 is written 500000, as the release writes it.
Json Number(double value) {
  if (std::floor(value) == value && std::abs(value) < 9e15) return static_cast<int64_t>(value);
  return value;
}

}  // namespace

const char* const kErnieChatTemplate =
    "{%- if not add_generation_prompt is defined -%}\n"
    "    {%- set add_generation_prompt = true -%}\n"
    "{%- endif -%}\n"
    "{%- if not cls_token is defined -%}\n"
    "    {%- set cls_token = \"<|begin_of_sentence|>\" -%}\n"
    "{%- endif -%}\n"
    "{%- if not sep_token is defined -%}\n"
    "    {%- set sep_token = \"<|end_of_sentence|>\" -%}\n"
    "{%- endif -%}\n"
    "{{- cls_token -}}\n"
    "{%- for message in messages -%}\n"
    "    {%- if message[\"role\"] == \"user\" -%}\n"
    "        {{- \"User: \" + message[\"content\"] + \"\\n\" -}}\n"
    "    {%- elif message[\"role\"] == \"assistant\" -%}\n"
    "        {{- \"Assistant: \" + message[\"content\"] + sep_token -}}\n"
    "    {%- elif message[\"role\"] == \"system\" -%}\n"
    "        {{- message[\"content\"] + \"\\n\" -}}\n"
    "    {%- endif -%}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "    {{- \"Assistant: \" -}}\n"
    "{%- endif -%}";

Json ModelConfigJson(const DenseShape& shape, WeightDtype dtype) {
  Json config;
  config["architectures"] = {"Ernie4_5_ForCausalLM"};
  config["auto_map"] = {{"AutoConfig", "configuration_ernie4_5.Ernie4_5_Config"},
                        {"AutoModel", "modeling_ernie4_5.Ernie4_5_Model"},
                        {"AutoModelForCausalLM", "modeling_ernie4_5.Ernie4_5_ForCausalLM"}};
  config["bos_token_id"] = kBosId;
  config["eos_token_id"] = kEosId;
  config["hidden_act"] = "silu";
  config["hidden_size"] = shape.hidden_size;
  config["intermediate_size"] = shape.intermediate_size;
  config["max_position_embeddings"] = shape.max_position_embeddings;
  config["model_type"] = "ernie4_5";
  config["num_attention_heads"] = shape.num_attention_heads;
  config["num_key_value_heads"] = shape.num_key_value_heads;
  config["head_dim"] = shape.head_dim;
  config["num_hidden_layers"] = shape.num_hidden_layers;
  config["pad_token_id"] = kUnkId;
  config["rms_norm_eps"] = shape.rms_norm_eps;
  config["use_cache"] = false;
  config["vocab_size"] = shape.vocab_size;
  config["rope_theta"] = Number(shape.rope_theta);
  config["use_bias"] = shape.use_bias;
  config["tie_word_embeddings"] = shape.tie_word_embeddings;
  config["torch_dtype"] = TorchDtypeName(dtype);
  if (shape.is_moe()) {
    // Baidu's Ernie4_5_MoeForCausalLM keys (ARCHITECTURE.md).
    config["architectures"] = {"Ernie4_5_MoeForCausalLM"};
    config["model_type"] = "ernie4_5_moe";
    config.erase("auto_map");
    config["moe_num_experts"] = shape.moe.num_experts;
    config["moe_k"] = shape.moe.top_k;
    config["moe_num_shared_experts"] = shape.moe.num_shared_experts;
    config["moe_intermediate_size"] = shape.moe.intermediate_size;
    config["moe_layer_start_index"] = shape.moe.layer_start;
    config["moe_layer_end_index"] = shape.moe.layer_end;
    config["moe_layer_interval"] = shape.moe.layer_interval;
    config["moe_norm_min"] = 1e-12;
  }
  return config;
}

Json GenerationConfigJson() {
  Json config;
  config["do_sample"] = true;
  config["top_p"] = 0.8;
  config["temperature"] = 0.8;
  config["repetition_penalty"] = 1.0;
  config["frequency_penalty"] = 0.0;
  config["presence_penalty"] = 0.0;
  config["bos_token_id"] = kBosId;
  config["eos_token_id"] = kEosId;
  config["pad_token_id"] = kUnkId;
  return config;
}

Json TokenizerConfigJson() {
  Json config;
  config["add_bos_token"] = false;
  config["add_eos_token"] = false;
  Json decoder = Json::object();
  for (const SpecialToken& token : AddedTokensDecoder()) {
    decoder[absl::StrCat(token.id)] = {{"content", token.content},
                                       {"lstrip", false},
                                       {"normalized", false},
                                       {"rstrip", false},
                                       {"single_word", false},
                                       {"special", true}};
  }
  config["added_tokens_decoder"] = decoder;
  config["additional_special_tokens"] = AdditionalSpecialTokens();
  config["auto_map"] = {{"AutoTokenizer", {"tokenization_ernie4_5.Ernie4_5_Tokenizer", nullptr}}};
  config["bos_token"] = "<s>";
  config["chat_template"] = kErnieChatTemplate;
  config["clean_up_tokenization_spaces"] = false;
  config["cls_token"] = "<|begin_of_sentence|>";
  config["eos_token"] = "</s>";
  config["extra_special_tokens"] = Json::object();
  config["header_end_token"] = MaskToken(7);
  config["header_start_token"] = MaskToken(6);
  config["legacy"] = true;
  config["mask_token"] = MaskToken(1);
  config["model_max_length"] = 131072;
  config["pad_token"] = "<unk>";
  config["padding_side"] = "left";
  config["sep_token"] = "<|end_of_sentence|>";
  config["sp_model_kwargs"] = Json::object();
  config["spaces_between_special_tokens"] = false;
  config["sys_end_token"] = MaskToken(5);
  config["sys_start_token"] = MaskToken(4);
  config["tokenizer_class"] = "Ernie4_5_Tokenizer";
  config["unk_token"] = "<unk>";
  config["use_default_system_prompt"] = false;
  return config;
}

Json SpecialTokensMapJson() {
  Json map;
  map["additional_special_tokens"] = AdditionalSpecialTokens();
  map["bos_token"] = "<s>";
  map["cls_token"] = "<|begin_of_sentence|>";
  map["eos_token"] = "</s>";
  map["mask_token"] = MaskToken(1);
  map["pad_token"] = "<unk>";
  map["sep_token"] = "<|end_of_sentence|>";
  map["unk_token"] = "<unk>";
  return map;
}

Json AddedTokensJson() {
  Json added = Json::object();
  for (const SpecialToken& token : AddedTokensDecoder()) {
    if (!token.in_sentencepiece) added[token.content] = token.id;
  }
  return added;
}

absl::Status WriteJsonFile(const std::string& path, const Json& json) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::InternalError(absl::StrCat("cannot create '", path, "'"));
  // ensure_ascii off: the release writes Chinese and emoji as UTF-8.
  out << json.dump(2, ' ', false) << "\n";
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write '", path, "'"));
  return absl::OkStatus();
}

absl::Status WriteConfigFiles(const std::string& dir, const DenseShape& shape, WeightDtype dtype,
                              const std::optional<AwqConfig>& awq) {
  Json config = ModelConfigJson(shape, dtype);
  if (awq.has_value()) config["quantization_config"] = Json::parse(AwqQuantizationConfigJson(*awq).dump());
  ERNIE_RETURN_IF_ERROR(WriteJsonFile(dir + "/config.json", config));
  ERNIE_RETURN_IF_ERROR(WriteJsonFile(dir + "/generation_config.json", GenerationConfigJson()));
  ERNIE_RETURN_IF_ERROR(WriteJsonFile(dir + "/tokenizer_config.json", TokenizerConfigJson()));
  ERNIE_RETURN_IF_ERROR(WriteJsonFile(dir + "/special_tokens_map.json", SpecialTokensMapJson()));
  ERNIE_RETURN_IF_ERROR(WriteJsonFile(dir + "/added_tokens.json", AddedTokensJson()));
  return absl::OkStatus();
}

}  // namespace ernie::make_model
