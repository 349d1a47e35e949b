#include "engine/model/model_config.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/util/status_macros.h"
#include "nlohmann/json.hpp"

namespace ernie {

namespace {

using nlohmann::json;

class ConfigReader {
 public:
  ConfigReader(const json& j, absl::string_view file) : j_(j), file_(file) {}

  absl::Status Error(absl::string_view key, absl::string_view why) const {
    return absl::InvalidArgumentError(absl::StrCat(file_, ": '", key, "' ", why));
  }

  // A positive integer; required unless a default is given.
  absl::StatusOr<int64_t> PositiveInt(const std::string& key, std::optional<int64_t> fallback = std::nullopt) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) {
      if (fallback) return *fallback;
      return Error(key, "is missing");
    }
    if (!it->is_number_integer()) return Error(key, "must be an integer");
    int64_t v = it->get<int64_t>();
    if (v <= 0) return Error(key, absl::StrCat("must be positive, got ", v));
    return v;
  }

  absl::StatusOr<double> PositiveNumber(const json& obj, const std::string& key, double fallback) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return fallback;
    if (!it->is_number()) return Error(key, "must be a number");
    double v = it->get<double>();
    if (!(v > 0)) return Error(key, "must be positive");
    return v;
  }

  // A positive number the engine uses in float32: one that rounds to 0 or
  // infinity there is not the value the config means (the model_config
  // fuzzer found rms_norm_eps 1e-50).
  absl::StatusOr<float> PositiveFloat32(const json& obj, const std::string& key, double fallback) const {
    ERNIE_ASSIGN_OR_RETURN(const double v, PositiveNumber(obj, key, fallback));
    const auto f = static_cast<float>(v);
    if (!(f > 0.0f) || std::isinf(f)) return Error(key, absl::StrCat(v, " is outside float32's range"));
    return f;
  }

  absl::StatusOr<bool> Bool(const std::string& key, bool fallback) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) return Error(key, "must be true or false");
    return it->get<bool>();
  }

  // A token id; -1 when absent.
  absl::StatusOr<int64_t> TokenId(const std::string& key, int64_t fallback) const {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return fallback;
    if (!it->is_number_integer() || it->get<int64_t>() < 0) return Error(key, "must be a non-negative integer");
    return it->get<int64_t>();
  }

 private:
  const json& j_;
  absl::string_view file_;
};

absl::StatusOr<Architecture> ReadArchitecture(const json& j, const ConfigReader& r, std::string* name) {
  auto it = j.find("architectures");
  if (it != j.end() && it->is_array() && !it->empty() && (*it)[0].is_string()) {
    *name = (*it)[0].get<std::string>();
  } else if (auto mt = j.find("model_type"); mt != j.end() && mt->is_string()) {
    *name = mt->get<std::string>();
  } else {
    return r.Error("architectures", "is missing (and no model_type)");
  }
  if (*name == "Ernie4_5ForCausalLM" || *name == "Ernie4_5_ForCausalLM" || *name == "ernie4_5") {
    return Architecture::kErnie45Dense;
  }
  if (*name == "Ernie4_5_MoeForCausalLM" || *name == "Ernie4_5MoeForCausalLM" || *name == "ernie4_5_moe") {
    return Architecture::kErnie45Moe;
  }
  return r.Error("architectures", absl::StrCat("'", *name,
                                               "' is not supported (Ernie4_5ForCausalLM / Ernie4_5_ForCausalLM are)"));
}

}  // namespace

namespace {

// Parameters of one SiLU-gated MLP of `width` on hidden size h.
int64_t MlpParameters(int64_t h, int64_t width, bool bias) { return 3 * h * width + (bias ? 2 * width + h : 0); }

}  // namespace

int64_t ModelConfig::ParameterCount() const {
  const int64_t h = hidden_size;
  int64_t attn = h * q_size() + 2 * h * kv_size() + q_size() * h;
  if (use_bias) attn += q_size() + 2 * kv_size() + h;
  int64_t layers = 0;
  for (int64_t i = 0; i < num_layers; ++i) {
    layers += attn + 2 * h;
    if (IsMoeLayer(i)) {
      layers += moe.num_experts * h + moe.num_experts;  // router (float32) and correction bias
      layers += moe.num_experts * MlpParameters(h, moe.intermediate_size, use_bias);
      if (moe.num_shared_experts > 0) layers += MlpParameters(h, moe.num_shared_experts * moe.intermediate_size, use_bias);
    } else {
      layers += MlpParameters(h, intermediate_size, use_bias);
    }
  }
  return vocab_size * h * (tie_word_embeddings ? 1 : 2) + layers + h;
}

int64_t ModelConfig::ActiveParameterCount() const {
  int64_t total = ParameterCount();
  for (int64_t i = 0; i < num_layers; ++i)
    if (IsMoeLayer(i)) total -= (moe.num_experts - moe.top_k) * MlpParameters(hidden_size, moe.intermediate_size, use_bias);
  return total;
}

absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view text, absl::string_view file) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(file, ": not valid JSON"));
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(file, ": not a JSON object"));
  ConfigReader r(j, file);
  ModelConfig c;
  ERNIE_ASSIGN_OR_RETURN(c.architecture, ReadArchitecture(j, r, &c.architecture_name));
  ERNIE_ASSIGN_OR_RETURN(c.vocab_size, r.PositiveInt("vocab_size"));
  ERNIE_ASSIGN_OR_RETURN(c.hidden_size, r.PositiveInt("hidden_size"));
  ERNIE_ASSIGN_OR_RETURN(c.num_layers, r.PositiveInt("num_hidden_layers"));
  ERNIE_ASSIGN_OR_RETURN(c.num_heads, r.PositiveInt("num_attention_heads"));
  ERNIE_ASSIGN_OR_RETURN(c.num_kv_heads, r.PositiveInt("num_key_value_heads", c.num_heads));
  ERNIE_ASSIGN_OR_RETURN(c.intermediate_size, r.PositiveInt("intermediate_size"));
  ERNIE_ASSIGN_OR_RETURN(c.max_position_embeddings, r.PositiveInt("max_position_embeddings", 131072));
  if (c.num_heads % c.num_kv_heads != 0)
    return r.Error("num_key_value_heads", absl::StrCat(c.num_kv_heads, " does not divide num_attention_heads ", c.num_heads));
  if (c.hidden_size % c.num_heads != 0 && !j.contains("head_dim"))
    return r.Error("head_dim", "is missing and hidden_size is not a multiple of num_attention_heads");
  ERNIE_ASSIGN_OR_RETURN(c.head_dim, r.PositiveInt("head_dim", c.hidden_size / c.num_heads));
  if (c.head_dim % 2 != 0) return r.Error("head_dim", "must be even (rotary pairs dimensions)");

  ERNIE_ASSIGN_OR_RETURN(c.rms_norm_eps, r.PositiveFloat32(j, "rms_norm_eps", 1e-5));
  // rope_theta: top level (Baidu) or inside rope_parameters (transformers 5).
  double theta = 10000.0;
  if (auto rp = j.find("rope_parameters"); rp != j.end() && rp->is_object()) {
    if (auto type = rp->find("rope_type"); type != rp->end() && type->is_string() && *type != "default")
      return r.Error("rope_parameters.rope_type", absl::StrCat("'", type->get<std::string>(), "' is not supported (only default)"));
    ERNIE_ASSIGN_OR_RETURN(theta, r.PositiveNumber(*rp, "rope_theta", theta));
  }
  ERNIE_ASSIGN_OR_RETURN(c.rope_theta, r.PositiveNumber(j, "rope_theta", theta));
  if (auto rs = j.find("rope_scaling"); rs != j.end() && !rs->is_null())
    return r.Error("rope_scaling", "is not supported");

  if (auto act = j.find("hidden_act"); act != j.end() && !act->is_null()) {
    if (!act->is_string() || (*act != "silu" && *act != "swish"))
      return r.Error("hidden_act", "must be \"silu\" (the ERNIE-4.5 activation)");
  }
  ERNIE_ASSIGN_OR_RETURN(c.tie_word_embeddings, r.Bool("tie_word_embeddings", true));
  ERNIE_ASSIGN_OR_RETURN(c.use_bias, r.Bool("use_bias", false));

  std::string dtype_name = "bfloat16";
  for (const char* key : {"dtype", "torch_dtype"}) {
    if (auto it = j.find(key); it != j.end() && it->is_string()) {
      dtype_name = it->get<std::string>();
      break;
    }
  }
  auto dtype = DTypeFromConfigName(dtype_name);
  if (!dtype) return r.Error("torch_dtype", absl::StrCat("'", dtype_name, "' is not float32, float16 or bfloat16"));
  c.dtype = *dtype;

  if (c.architecture == Architecture::kErnie45Moe) {
    MoeConfig& m = c.moe;
    ERNIE_ASSIGN_OR_RETURN(m.num_experts, r.PositiveInt("moe_num_experts"));
    ERNIE_ASSIGN_OR_RETURN(m.top_k, r.PositiveInt("moe_k"));
    if (m.top_k > m.num_experts)
      return r.Error("moe_k", absl::StrCat(m.top_k, " is more than moe_num_experts ", m.num_experts));
    ERNIE_ASSIGN_OR_RETURN(m.intermediate_size, r.PositiveInt("moe_intermediate_size"));
    ERNIE_ASSIGN_OR_RETURN(m.layer_interval, r.PositiveInt("moe_layer_interval", 1));
    auto int_or = [&](const char* key, int64_t fallback, int64_t min) -> absl::StatusOr<int64_t> {
      auto it = j.find(key);
      if (it == j.end() || it->is_null()) return fallback;
      if (!it->is_number_integer() || it->get<int64_t>() < min)
        return r.Error(key, absl::StrCat("must be an integer >= ", min));
      return it->get<int64_t>();
    };
    ERNIE_ASSIGN_OR_RETURN(m.num_shared_experts, int_or("moe_num_shared_experts", 0, 0));
    ERNIE_ASSIGN_OR_RETURN(m.layer_start, int_or("moe_layer_start_index", 0, 0));
    ERNIE_ASSIGN_OR_RETURN(m.layer_end, int_or("moe_layer_end_index", -1, -1));
    if (m.layer_end < 0 || m.layer_end >= c.num_layers) m.layer_end = c.num_layers - 1;  // -1: the last layer
    ERNIE_ASSIGN_OR_RETURN(m.norm_min, r.PositiveFloat32(j, "moe_norm_min", 1e-12));
  }
  ERNIE_ASSIGN_OR_RETURN(c.awq, ParseQuantizationConfig(j, file));
  ERNIE_ASSIGN_OR_RETURN(c.bos_token_id, r.TokenId("bos_token_id", 1));
  ERNIE_ASSIGN_OR_RETURN(c.pad_token_id, r.TokenId("pad_token_id", 0));
  if (auto eos = j.find("eos_token_id"); eos != j.end() && !eos->is_null()) {
    if (eos->is_number_integer()) {
      c.eos_token_ids.push_back(eos->get<int64_t>());
    } else if (eos->is_array()) {
      for (const auto& e : *eos) {
        if (!e.is_number_integer()) return r.Error("eos_token_id", "must be an integer or a list of integers");
        c.eos_token_ids.push_back(e.get<int64_t>());
      }
    } else {
      return r.Error("eos_token_id", "must be an integer or a list of integers");
    }
  } else {
    c.eos_token_ids.push_back(2);
  }
  return c;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir) {
  const std::string path = (std::filesystem::path(model_dir) / "config.json").string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseModelConfig(ss.str(), path);
}

}  // namespace ernie
