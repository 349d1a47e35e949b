#include "tools/quantize/quantize_model.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/backend/cpu/elementwise.h"
#include "engine/model/ernie4_5_weights.h"
#include "engine/util/status_macros.h"
#include "engine/util/thread_pool.h"
#include "nlohmann/json.hpp"
#include "tools/quantize/awq_search.h"
#include "tools/quantize/calibration.h"
#include "tools/quantize/model_runner.h"
#include "tools/quantize/output_checkpoint.h"

namespace ernie::quantize {

namespace fs = std::filesystem;

namespace {

std::string PrefixOf(const LinearWeights& lin) {
  const std::string& name = lin.weight->name;
  return name.substr(0, name.size() - std::string(".weight").size());
}

std::vector<float> Widen(const TensorView& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  cpu::WidenToFloat(t, v.data());
  return v;
}

// A linear's float weight [out, in], to be scaled before quantization.
struct FloatLinear {
  const LinearWeights* lin = nullptr;
  std::vector<float> w;  // [out, in]
  int64_t out() const { return lin->out_features(); }
  int64_t in() const { return lin->in_features(); }
  void ScaleColumns(const std::vector<float>& s) {
    for (int64_t o = 0; o < out(); ++o)
      for (int64_t i = 0; i < in(); ++i) w[static_cast<size_t>(o * in() + i)] *= s[static_cast<size_t>(i)];
  }
  void DivideRows(const std::vector<float>& s) {
    for (int64_t o = 0; o < out(); ++o)
      for (int64_t i = 0; i < in(); ++i) w[static_cast<size_t>(o * in() + i)] /= s[static_cast<size_t>(o)];
  }
};

FloatLinear Load(const LinearWeights& lin) { return {&lin, Widen(*lin.weight)}; }

void Emit(const FloatLinear& f, int64_t group, OutputCheckpoint& out) {
  out.ReplaceWithAwq(PrefixOf(*f.lin), QuantizeGroupwise(f.w.data(), f.out(), f.in(), group));
}

// Divides a float vector tensor (a norm or a bias) by s into the output.
void FoldDivide(const TensorView* t, const std::vector<float>& s, OutputCheckpoint& out) {
  if (t == nullptr) return;
  std::vector<float> v = Widen(*t);
  for (size_t i = 0; i < v.size(); ++i) v[i] /= s[i];
  out.ReplaceFloat(*t, v);
}

absl::Status CheckQuantizable(const LinearWeights& lin, int64_t group) {
  if (lin.in_features() % group != 0)
    return absl::InvalidArgumentError(absl::StrCat(lin.weight->file, ": tensor '", lin.weight->name, "' has ",
                                                   lin.in_features(), " inputs, not a multiple of --group-size ",
                                                   group, " (try a smaller group size)"));
  if (lin.out_features() % 8 != 0)
    return absl::InvalidArgumentError(absl::StrCat(lin.weight->file, ": tensor '", lin.weight->name, "' has ",
                                                   lin.out_features(), " outputs, not a multiple of 8"));
  return absl::OkStatus();
}

std::vector<const LinearWeights*> AllLinears(const Ernie45LayerWeights& l) {
  std::vector<const LinearWeights*> all = {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj};
  auto add_mlp = [&all](const MlpWeights& m) {
    for (const LinearWeights* lin : {&m.gate_proj, &m.up_proj, &m.down_proj}) all.push_back(lin);
  };
  if (l.is_moe) {
    for (const MlpWeights& e : l.moe.experts) add_mlp(e);
    if (l.moe.has_shared) add_mlp(l.moe.shared);
  } else {
    for (const LinearWeights* lin : {&l.gate_proj, &l.up_proj, &l.down_proj}) all.push_back(lin);
  }
  return all;
}

// The context one layer's quantization needs.
struct LayerJob {
  const ModelConfig& config;
  const QuantizeOptions& options;
  const LayerActivations* acts;  // null for RTN
  ThreadPool& pool;
  OutputCheckpoint& out;
};

// Searches the scales of one group; all ones (RTN) when `acts` is null or
// `enabled` is false. Logs the choice.
std::vector<float> GroupScales(const LayerJob& job, int64_t layer, cpu::LinearInput which, const char* what,
                               const std::vector<const FloatLinear*>& linears, bool enabled) {
  const int64_t in = linears[0]->in();
  if (job.acts == nullptr || !enabled) return std::vector<float>(static_cast<size_t>(in), 1.0f);
  const GroupActivations& g = (*job.acts)[static_cast<size_t>(which)];
  std::vector<SearchWeight> weights;
  for (const FloatLinear* f : linears) weights.push_back({f->w.data(), f->out()});
  ScaleSearchResult r = SearchScales(g.rows.data(), g.num_rows(), in, g.mean_abs, weights, job.options.group_size,
                                     job.options.alpha_grid, job.pool);
  std::fprintf(stderr, "  layer %lld %-7s alpha %.2f  output MSE %.4g (RTN %.4g)\n", static_cast<long long>(layer),
               what, r.alpha, r.loss, r.rtn_loss);
  return r.scales;
}

void QuantizeLayer(const LayerJob& job, int64_t layer, const Ernie45LayerWeights& l) {
  const ModelConfig& c = job.config;
  const int64_t group = job.options.group_size;
  FloatLinear q = Load(l.q_proj), k = Load(l.k_proj), v = Load(l.v_proj), o = Load(l.o_proj);
  const auto s_qkv = GroupScales(job, layer, cpu::LinearInput::kQkv, "qkv", {&q, &k, &v}, true);
  // o_proj's input channel h*d+j is v's output channel (h / group)*d+j; a
  // scale folds into v only when that map is one to one.
  const auto s_o = GroupScales(job, layer, cpu::LinearInput::kOProj, "o_proj", {&o}, c.num_heads == c.num_kv_heads);
  q.ScaleColumns(s_qkv);
  k.ScaleColumns(s_qkv);
  v.ScaleColumns(s_qkv);
  FoldDivide(l.input_norm, s_qkv, job.out);
  v.DivideRows(s_o);
  FoldDivide(l.v_proj.bias, s_o, job.out);
  o.ScaleColumns(s_o);
  for (const FloatLinear* f : {&q, &k, &v, &o}) Emit(*f, group, job.out);

  if (l.is_moe) {
    for (const LinearWeights* lin : AllLinears(l))
      if (lin != &l.q_proj && lin != &l.k_proj && lin != &l.v_proj && lin != &l.o_proj) Emit(Load(*lin), group, job.out);
    return;
  }
  FloatLinear gate = Load(l.gate_proj), up = Load(l.up_proj), down = Load(l.down_proj);
  const auto s_gu = GroupScales(job, layer, cpu::LinearInput::kGateUp, "gate_up", {&gate, &up}, true);
  const auto s_down = GroupScales(job, layer, cpu::LinearInput::kDown, "down", {&down}, true);
  gate.ScaleColumns(s_gu);
  up.ScaleColumns(s_gu);
  FoldDivide(l.post_attn_norm, s_gu, job.out);
  up.DivideRows(s_down);
  FoldDivide(l.up_proj.bias, s_down, job.out);
  down.ScaleColumns(s_down);
  for (const FloatLinear* f : {&gate, &up, &down}) Emit(*f, group, job.out);
}

absl::Status CopySideFiles(const std::string& in_dir, const std::string& out_dir, const AwqConfig& awq) {
  for (const auto& entry : fs::directory_iterator(in_dir)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || name == "config.json" || name == "model.safetensors.index.json" ||
        entry.path().extension() == ".safetensors")
      continue;
    std::error_code ec;
    fs::copy_file(entry.path(), fs::path(out_dir) / name, fs::copy_options::overwrite_existing, ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot copy ", entry.path().string(), ": ", ec.message()));
  }
  const std::string config_path = (fs::path(in_dir) / "config.json").string();
  ERNIE_ASSIGN_OR_RETURN(std::string text, ReadTextFile(config_path));
  nlohmann::ordered_json config = nlohmann::ordered_json::parse(text, nullptr, false);
  if (config.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(config_path, ": not valid JSON"));
  config["quantization_config"] = nlohmann::ordered_json::parse(AwqQuantizationConfigJson(awq).dump());
  std::ofstream out(fs::path(out_dir) / "config.json");
  out << config.dump(2) << "\n";
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", out_dir, "/config.json"));
  return absl::OkStatus();
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

absl::Status QuantizeModel(const QuantizeOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  ERNIE_ASSIGN_OR_RETURN(auto model, LoadModel(o.input_dir));
  const ModelConfig& c = model->config;
  if (c.awq) return absl::InvalidArgumentError(absl::StrCat(o.input_dir, ": already an AWQ checkpoint"));
  for (const Ernie45LayerWeights& l : model->weights.layers)
    for (const LinearWeights* lin : AllLinears(l)) ERNIE_RETURN_IF_ERROR(CheckQuantizable(*lin, o.group_size));
  if (fs::exists(fs::path(o.output_dir) / "config.json") || fs::exists(fs::path(o.output_dir) / "model.safetensors"))
    return absl::AlreadyExistsError(absl::StrCat(o.output_dir, " already holds a checkpoint"));
  std::error_code ec;
  fs::create_directories(o.output_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", o.output_dir, ": ", ec.message()));

  std::vector<LayerActivations> acts;
  if (o.method == QuantMethod::kAwq) {
    ERNIE_ASSIGN_OR_RETURN(std::string text, ReadTextFile(o.calib_file));
    ERNIE_ASSIGN_OR_RETURN(auto tokens, TokensForModel(o.input_dir, text, c.vocab_size, o.calib_tokens));
    std::fprintf(stderr, "ernie-quantize: calibrating on %zu tokens of %s\n", tokens.size(), o.calib_file.c_str());
    ERNIE_ASSIGN_OR_RETURN(acts, CollectActivations(*model, tokens, o.threads));
    std::fprintf(stderr, "ernie-quantize: calibration done (%.1f s)\n", Seconds(start));
  }
  ThreadPool pool(o.threads);
  OutputCheckpoint out(*model->checkpoint);
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const LayerJob job{c, o, acts.empty() ? nullptr : &acts[static_cast<size_t>(i)], pool, out};
    QuantizeLayer(job, i, model->weights.layers[static_cast<size_t>(i)]);
    std::fprintf(stderr, "ernie-quantize: layer %lld/%lld (%.1f s)\n", static_cast<long long>(i + 1),
                 static_cast<long long>(c.num_layers), Seconds(start));
  }
  ERNIE_RETURN_IF_ERROR(out.Write(o.output_dir));
  ERNIE_RETURN_IF_ERROR(CopySideFiles(o.input_dir, o.output_dir, AwqConfig{.group_size = o.group_size}));
  std::fprintf(stderr, "ernie-quantize: wrote %s: %lld bytes of tensors (from %lld) in %.1f s\n", o.output_dir.c_str(),
               static_cast<long long>(out.total_bytes()), static_cast<long long>(model->checkpoint->total_bytes()),
               Seconds(start));
  return absl::OkStatus();
}

}  // namespace ernie::quantize
