#include "services/launcher/vllm_compat.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "nlohmann/json.hpp"

namespace ernie::launcher {

namespace fs = std::filesystem;

namespace {

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<fs::path> HubCacheDirs() {
  std::vector<fs::path> dirs;
  if (const char* c = std::getenv("HF_HUB_CACHE"); c && *c) dirs.emplace_back(c);
  if (const char* h = std::getenv("HF_HOME"); h && *h) dirs.push_back(fs::path(h) / "hub");
  if (const char* home = std::getenv("HOME"); home && *home) dirs.push_back(fs::path(home) / ".cache/huggingface/hub");
  return dirs;
}

}  // namespace

absl::StatusOr<std::string> ResolveModelDir(const std::string& model) {
  if (fs::exists(fs::path(model) / "config.json")) return model;
  if (fs::exists(model)) return absl::NotFoundError(absl::StrCat(model, " is not a model directory (no config.json)"));
  // "baidu/ERNIE-4.5-0.3B-PT": the Hugging Face cache keeps it as
  // models--baidu--ERNIE-4.5-0.3B-PT/snapshots/<revision>/ (refs/main names the revision).
  if (model.find('/') != std::string::npos && model.front() != '/' && model.front() != '.') {
    const std::string entry = absl::StrCat("models--", absl::StrReplaceAll(model, {{"/", "--"}}));
    std::string looked;
    for (const fs::path& cache : HubCacheDirs()) {
      const fs::path repo = cache / entry;
      absl::StrAppend(&looked, looked.empty() ? "" : ", ", repo.string());
      std::string revision = ReadFile(repo / "refs/main");
      while (!revision.empty() && (revision.back() == '\n' || revision.back() == ' ')) revision.pop_back();
      if (!revision.empty() && fs::exists(repo / "snapshots" / revision / "config.json"))
        return (repo / "snapshots" / revision).string();
      std::error_code ec;
      for (const auto& snap : fs::directory_iterator(repo / "snapshots", ec))
        if (fs::exists(snap.path() / "config.json")) return snap.path().string();
    }
    return absl::NotFoundError(absl::StrCat("model '", model, "' is neither a local folder nor in the Hugging Face cache (",
                                            looked, "); ernie-serve never downloads: fetch it first, e.g. "
                                            "`huggingface-cli download ", model, "`, or pass the folder"));
  }
  return absl::NotFoundError(absl::StrCat("model folder ", model, " does not exist"));
}

absl::StatusOr<std::vector<std::string>> ApplyVllmOptions(const std::string& model_dir, LauncherOptions* o) {
  std::vector<std::string> notes;
  if (o->tensor_parallel_size != 1)
    return absl::InvalidArgumentError(absl::StrCat("--tensor-parallel-size ", o->tensor_parallel_size,
                                                   ": ernie-serve runs a model on one device; only 1 is supported"));
  static const char* kDtypes[] = {"auto", "half", "float16", "bfloat16", "float", "float32"};
  if (std::find(std::begin(kDtypes), std::end(kDtypes), o->dtype) == std::end(kDtypes))
    return absl::InvalidArgumentError(absl::StrCat("--dtype '", o->dtype,
                                                   "' is not one of auto, half, float16, bfloat16, float, float32"));
  if (o->dtype != "auto")
    notes.push_back(absl::StrCat("--dtype ", o->dtype, ": the CPU backend reads weights as stored and computes in float32"));

  const auto config = nlohmann::json::parse(ReadFile(fs::path(model_dir) / "config.json"), nullptr, false);
  const bool is_awq = config.is_object() && config.contains("quantization_config") &&
                      config["quantization_config"].is_object() &&
                      config["quantization_config"].value("quant_method", "") == "awq";
  if (!o->quantization.empty()) {
    if (o->quantization != "awq")
      return absl::InvalidArgumentError(absl::StrCat("--quantization '", o->quantization, "' is not supported (awq is)"));
    if (!is_awq)
      return absl::InvalidArgumentError(absl::StrCat("--quantization awq: ", model_dir,
                                                     "/config.json has no quantization_config with quant_method \"awq\"; "
                                                     "this is not an AutoAWQ checkpoint"));
  }
  if (is_awq)
    notes.push_back(absl::StrCat(model_dir, " is an AutoAWQ checkpoint: 4-bit weights (int4 kernels on CUDA, dequantised on the fly on the CPU)"));

  // vLLM: auto = the model's generation_config.json; vllm = none (OpenAI's
  // defaults); a folder = that folder's generation_config.json instead.
  if (o->generation_config == "vllm") {
    o->gateway_args.insert(o->gateway_args.end(), {"--generation-config", "{}"});
  } else if (o->generation_config != "auto") {
    const fs::path file = fs::path(o->generation_config) / "generation_config.json";
    if (!fs::exists(file))
      return absl::NotFoundError(absl::StrCat("--generation-config ", o->generation_config, ": no generation_config.json there"));
    o->gateway_args.insert(o->gateway_args.end(), {"--generation-config", ReadFile(file)});
  }
  return notes;
}

}  // namespace ernie::launcher
