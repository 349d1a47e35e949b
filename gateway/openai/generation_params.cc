#include "gateway/openai/generation_params.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace ernie::gateway {
namespace {

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();

absl::Status ReadOptionalNumber(const nlohmann::json& config, const char* key, const std::string& origin,
                                std::optional<double>* out) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number()) return absl::InvalidArgumentError(absl::StrCat(origin, ": '", key, "' must be a number"));
  *out = it->get<double>();
  return absl::OkStatus();
}

// An integer (written 50 or 50.0) in [min, max]; anything else, a huge
// 5e100 included, is an error rather than an undefined conversion.
absl::Status ReadOptionalInteger(const nlohmann::json& config, const char* key, const std::string& origin,
                                 int64_t min, int64_t max, std::optional<int64_t>* out) {
  std::optional<double> number;
  if (absl::Status status = ReadOptionalNumber(config, key, origin, &number); !status.ok() || !number) return status;
  if (!(std::floor(*number) == *number && *number >= static_cast<double>(min) &&
        *number <= static_cast<double>(max))) {
    return absl::InvalidArgumentError(
        absl::StrCat(origin, ": '", key, "' must be an integer between ", min, " and ", max, ", got ", *number));
  }
  *out = static_cast<int64_t>(*number);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GenerationDefaults> ParseGenerationDefaults(const std::string& json_text, const std::string& origin) {
  const nlohmann::json config = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": not a JSON object"));
  }
  GenerationDefaults defaults;
  // transformers' do_sample=false means greedy whatever the temperature says.
  const auto do_sample = config.find("do_sample");
  const bool greedy = do_sample != config.end() && do_sample->is_boolean() && !do_sample->get<bool>();
  absl::Status status = ReadOptionalNumber(config, "temperature", origin, &defaults.temperature);
  if (status.ok()) status = ReadOptionalNumber(config, "top_p", origin, &defaults.top_p);
  if (status.ok()) status = ReadOptionalNumber(config, "min_p", origin, &defaults.min_p);
  if (status.ok()) status = ReadOptionalNumber(config, "repetition_penalty", origin, &defaults.repetition_penalty);
  if (status.ok()) status = ReadOptionalNumber(config, "presence_penalty", origin, &defaults.presence_penalty);
  if (status.ok()) status = ReadOptionalNumber(config, "frequency_penalty", origin, &defaults.frequency_penalty);
  if (!status.ok()) return status;
  if (status = ReadOptionalInteger(config, "top_k", origin, -1, kMaxInt32, &defaults.top_k); !status.ok()) {
    return status;
  }
  status = ReadOptionalInteger(config, "max_new_tokens", origin, 0, kMaxInt32, &defaults.max_new_tokens);
  if (!status.ok()) return status;
  if (greedy) defaults.temperature = 0.0;
  return defaults;
}

absl::StatusOr<GenerationDefaults> LoadGenerationDefaults(const std::string& model_dir) {
  const std::string path = absl::StrCat(model_dir, "/generation_config.json");
  std::ifstream file(path);
  if (!file) return GenerationDefaults{};
  std::stringstream text;
  text << file.rdbuf();
  return ParseGenerationDefaults(text.str(), path);
}

void ReadGenerationParams(FieldReader& reader, const GenerationLimits& limits,
                          const std::vector<const char*>& max_tokens_fields, GenerationParams* out) {
  if (auto n = reader.Integer("n", 1, limits.max_n)) out->n = static_cast<int>(*n);
  for (const char* name : max_tokens_fields) {
    auto value = reader.Integer(name, 1, kMaxInt32);
    if (value && *value > limits.max_tokens) {
      reader.Fail(name, absl::StrCat("'", name, "' is ", *value, ", above this server's limit of ", limits.max_tokens,
                                     " (--max-tokens-limit)"));
      value.reset();
    }
    if (value && !out->max_tokens) out->max_tokens = value;
  }
  out->temperature = reader.Number("temperature", 0.0, std::numeric_limits<double>::max());
  if (reader.Get("top_p") != nullptr) {
    out->top_p = reader.Number("top_p", 0.0, 1.0);
    if (out->top_p && *out->top_p <= 0.0) reader.Fail("top_p", "'top_p' must be in (0, 1], got 0");
  }
  if (auto top_k = reader.Integer("top_k", -1, kMaxInt32)) out->top_k = *top_k;
  out->min_p = reader.Number("min_p", 0.0, 1.0);
  if (reader.Get("repetition_penalty") != nullptr) {
    out->repetition_penalty = reader.Number("repetition_penalty", 0.0, std::numeric_limits<double>::max());
    if (out->repetition_penalty && *out->repetition_penalty <= 0.0) {
      reader.Fail("repetition_penalty", "'repetition_penalty' must be greater than 0");
    }
  }
  out->presence_penalty = reader.Number("presence_penalty", -2.0, 2.0);
  out->frequency_penalty = reader.Number("frequency_penalty", -2.0, 2.0);
  if (const Json* bias = reader.Get("logit_bias")) {
    if (!bias->is_object()) {
      reader.Fail("logit_bias", absl::StrCat("'logit_bias' must be an object of token id -> bias, got ",
                                             JsonTypeName(*bias)));
    } else if (bias->size() > static_cast<size_t>(limits.max_logit_bias)) {
      reader.Fail("logit_bias", absl::StrCat("'logit_bias' has ", bias->size(), " entries, above this server's limit of ",
                                             limits.max_logit_bias, " (--max-logit-bias)"));
    } else {
      for (const auto& [key, value] : bias->items()) {
        const std::string param = absl::StrCat("logit_bias.", key);
        int64_t id = -1;
        try {
          size_t used = 0;
          id = std::stoll(key, &used);
          if (used != key.size()) id = -1;
        } catch (...) {
          id = -1;
        }
        if (id < 0 || id > kMaxInt32 || (limits.vocab_size > 0 && id >= limits.vocab_size)) {
          reader.Fail(param, absl::StrCat("'logit_bias' key '", key, "' is not a token id of this model"));
          break;
        }
        if (!value.is_number() || value.get<double>() < -100.0 || value.get<double>() > 100.0) {
          reader.Fail(param, absl::StrCat("'logit_bias' value for token ", key, " must be a number in [-100, 100]"));
          break;
        }
        out->logit_bias[static_cast<int32_t>(id)] = value.get<float>();
      }
    }
  }
  if (const Json* seed = reader.Get("seed")) {
    if (seed->is_number_unsigned()) {
      out->seed = seed->get<uint64_t>();
    } else if (seed->is_number_integer()) {
      out->seed = static_cast<uint64_t>(seed->get<int64_t>());  // negative seeds wrap, as Python's would hash
    } else {
      reader.Fail("seed", absl::StrCat("'seed' must be an integer, got ", JsonTypeName(*seed)));
    }
  }
  if (auto stop = reader.StringOrStringList("stop")) {
    if (stop->size() > static_cast<size_t>(limits.max_stop_strings)) {
      reader.Fail("stop", absl::StrCat("'stop' has ", stop->size(), " strings, above this server's limit of ",
                                       limits.max_stop_strings, " (--max-stop-strings)"));
      stop->clear();
    }
    for (size_t i = 0; i < stop->size(); ++i) {
      std::string& s = (*stop)[i];
      if (s.size() > limits.max_stop_string_bytes) {
        reader.Fail(stop->size() == 1 && reader.Get("stop")->is_string() ? std::string("stop") : absl::StrCat("stop[", i, "]"),
                    absl::StrCat("stop string of ", s.size(), " bytes is above this server's limit of ",
                                 limits.max_stop_string_bytes, " bytes (--max-stop-string-bytes)"));
        break;
      }
      if (!s.empty()) out->stop.push_back(std::move(s));  // an empty stop string matches nothing
    }
  }
  const int64_t max_id = limits.vocab_size > 0 ? limits.vocab_size - 1 : kMaxInt32;
  if (auto ids = reader.IntegerList("stop_token_ids", 0, max_id)) out->stop_token_ids = std::move(*ids);
  if (auto ignore_eos = reader.Bool("ignore_eos")) out->ignore_eos = *ignore_eos;
  if (auto min_tokens = reader.Integer("min_tokens", 0, kMaxInt32)) out->min_tokens = *min_tokens;
  if (out->max_tokens && out->min_tokens > *out->max_tokens) {
    reader.Fail("min_tokens", absl::StrCat("'min_tokens' (", out->min_tokens, ") must not exceed max_tokens (",
                                           *out->max_tokens, ")"));
  }
  if (auto skip = reader.Bool("skip_special_tokens")) out->skip_special_tokens = *skip;
  if (auto stream = reader.Bool("stream")) out->stream = *stream;
  if (const Json* options = reader.Object("stream_options")) {
    if (!out->stream) {
      reader.Fail("stream_options", "'stream_options' can only be set when 'stream' is true");
    } else if (auto it = options->find("include_usage"); it != options->end() && !it->is_null()) {
      if (!it->is_boolean()) {
        reader.Fail("stream_options.include_usage", "'stream_options.include_usage' must be a boolean");
      } else {
        out->include_usage = it->get<bool>();
      }
    }
  }
  if (auto user = reader.String("user")) out->user = std::move(*user);
  // Structured output (JSON mode, JSON schema) is not implemented: refused,
  // not ignored, since a client that asked for JSON would get free text.
  if (const Json* format = reader.Object("response_format")) {
    const auto type = format->find("type");
    if (type == format->end() || !type->is_string()) {
      reader.Fail("response_format.type", "'response_format.type' must be a string");
    } else if (type->get<std::string>() != "text") {
      reader.Fail("response_format.type",
                  absl::StrCat("response_format type '", type->get<std::string>(),
                               "' is not supported: this server does not constrain output to JSON; only 'text'"));
    }
  }
}

ernie::v1::SamplingParams ToSamplingParams(const GenerationParams& params, const GenerationDefaults& defaults,
                                           int32_t max_tokens) {
  ernie::v1::SamplingParams sampling;
  sampling.set_temperature(static_cast<float>(params.temperature.value_or(defaults.temperature.value_or(1.0))));
  sampling.set_top_p(static_cast<float>(params.top_p.value_or(defaults.top_p.value_or(1.0))));
  sampling.set_top_k(static_cast<int32_t>(params.top_k.value_or(defaults.top_k.value_or(0))));
  sampling.set_min_p(static_cast<float>(params.min_p.value_or(defaults.min_p.value_or(0.0))));
  sampling.set_repetition_penalty(
      static_cast<float>(params.repetition_penalty.value_or(defaults.repetition_penalty.value_or(1.0))));
  sampling.set_presence_penalty(
      static_cast<float>(params.presence_penalty.value_or(defaults.presence_penalty.value_or(0.0))));
  sampling.set_frequency_penalty(
      static_cast<float>(params.frequency_penalty.value_or(defaults.frequency_penalty.value_or(0.0))));
  for (const auto& [id, bias] : params.logit_bias) (*sampling.mutable_logit_bias())[id] = bias;
  if (params.seed) sampling.set_seed(*params.seed);
  for (int32_t id : params.stop_token_ids) sampling.add_stop_token_ids(id);
  sampling.set_ignore_eos(params.ignore_eos);
  sampling.set_min_tokens(static_cast<int32_t>(params.min_tokens));
  sampling.set_max_tokens(max_tokens);
  sampling.set_logprobs(params.logprobs);
  sampling.set_top_logprobs(params.top_logprobs);
  sampling.set_n(params.n);
  return sampling;
}

}  // namespace ernie::gateway
