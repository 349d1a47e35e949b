#include "tools/quantize/quantize_model.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/model/ernie4_5_weights.h"
#include "engine/util/status_macros.h"
#include "engine/util/thread_pool.h"
#include "nlohmann/json.hpp"
#include "tools/quantize/awq_search.h"
#include "tools/quantize/calibration.h"
#include "tools/quantize/float_linear.h"
#include "tools/quantize/model_runner.h"
#include "tools/quantize/moe_awq.h"
#include "tools/quantize/output_checkpoint.h"

namespace ernie::quantize {

namespace fs = std::filesystem;

namespace {

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

// What the output replaces: every linear's weight becomes AWQ tensors; with
// calibration, each MoE router is written in float32 (QuantizeMoeMlp scales it).
OutputPlan PlanOutput(const Ernie45Weights& weights, const QuantizeOptions& o) {
  OutputPlan plan{.group_size = o.group_size};
  for (const Ernie45LayerWeights& l : weights.layers) {
    for (const LinearWeights* lin : AllLinears(l)) {
      const std::string& name = lin->weight->name;
      plan.quantized.push_back({name.substr(0, name.size() - std::string(".weight").size()), lin->in_features(),
                                lin->out_features()});
    }
    if (l.is_moe && o.method == QuantMethod::kAwq) plan.float32.insert(l.moe.router->name);
  }
  return plan;
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
  SearchInput input{g.rows.data(), g.num_rows(), {}};
  for (const FloatLinear* f : linears) input.weights.push_back({f->w.data(), f->out()});
  ScaleSearchResult r = SearchScales({&input, 1}, in, g.mean_abs, job.options.group_size, job.options.alpha_grid, job.pool);
  std::fprintf(stderr, "  layer %lld %-7s alpha %.2f  output MSE %.4g (RTN %.4g)\n", static_cast<long long>(layer),
               what, r.alpha, r.loss, r.rtn_loss);
  return r.scales;
}

// A MoE layer's MLP (moe_awq.h): one scale for the block's input, one for
// each expert's down_proj; RTN throughout without calibration.
void QuantizeMoeMlp(const LayerJob& job, int64_t layer, const Ernie45LayerWeights& l) {
  const int64_t group = job.options.group_size;
  FloatMoeMlp f = LoadFloatMoeMlp(l.moe);
  if (job.acts != nullptr) {
    const GroupActivations& input = (*job.acts)[static_cast<size_t>(cpu::LinearInput::kGateUp)];
    const MoeMlpScales s = SearchMoeMlpScales(job.config, l.moe, input, f, group, job.options.alpha_grid, job.pool);
    ApplyMoeMlpScales(s, f);
    FoldDivide(l.post_attn_norm, s.gate_up.scales, job.out);
    job.out.ReplaceFloat(*l.moe.router, f.router, DType::kF32);
    double loss = 0, rtn = 0, alphas = 0;
    int unrouted = 0;
    for (size_t e = 0; e < s.down.size(); ++e) {
      loss += s.down[e].loss;
      rtn += s.down[e].rtn_loss;
      alphas += s.down[e].alpha;
      unrouted += s.routed_rows[e] == 0;
    }
    std::fprintf(stderr, "  layer %lld %-7s alpha %.2f  output MSE %.4g (RTN %.4g), %zu experts%s\n",
                 static_cast<long long>(layer), "gate_up", s.gate_up.alpha, s.gate_up.loss, s.gate_up.rtn_loss,
                 f.experts.size(), f.shared ? " + shared" : "");
    std::fprintf(stderr, "  layer %lld %-7s mean alpha %.2f  output MSE summed over experts %.4g (RTN %.4g); "
                 "%d of %zu experts saw no calibration token (RTN)\n", static_cast<long long>(layer), "down",
                 alphas / static_cast<double>(std::max<size_t>(1, s.down.size())), loss, rtn, unrouted, s.down.size());
    if (s.shared_down)
      std::fprintf(stderr, "  layer %lld %-7s alpha %.2f  output MSE %.4g (RTN %.4g)\n", static_cast<long long>(layer),
                   "shared down", s.shared_down->alpha, s.shared_down->loss, s.shared_down->rtn_loss);
  }
  auto emit = [&](const FloatMlp& m) {
    for (const FloatLinear* lin : {&m.gate, &m.up, &m.down}) EmitQuantized(*lin, group, job.out);
  };
  for (const FloatMlp& m : f.experts) emit(m);
  if (f.shared) emit(*f.shared);
}

void QuantizeLayer(const LayerJob& job, int64_t layer, const Ernie45LayerWeights& l) {
  const ModelConfig& c = job.config;
  const int64_t group = job.options.group_size;
  FloatLinear q = LoadFloatLinear(l.q_proj), k = LoadFloatLinear(l.k_proj), v = LoadFloatLinear(l.v_proj),
              o = LoadFloatLinear(l.o_proj);
  const auto s_qkv = GroupScales(job, layer, cpu::LinearInput::kQkv, "qkv", {&q, &k, &v}, true);
  // o_proj's input channel h*d+j is v's output channel (h / group)*d+j; a
  // scale folds into v only when that map is one to one.
  const auto s_o = GroupScales(job, layer, cpu::LinearInput::kOProj, "o_proj", {&o}, c.num_heads == c.num_kv_heads);
  q.ScaleColumns(s_qkv);
  k.ScaleColumns(s_qkv);
  v.ScaleColumns(s_qkv);
  FoldDivide(l.input_norm, s_qkv, job.out);
  v.DivideRows(s_o);
  o.ScaleColumns(s_o);
  for (const FloatLinear* f : {&q, &k, &v, &o}) EmitQuantized(*f, group, job.out);

  if (l.is_moe) {
    QuantizeMoeMlp(job, layer, l);
    return;
  }
  FloatLinear gate = LoadFloatLinear(l.gate_proj), up = LoadFloatLinear(l.up_proj), down = LoadFloatLinear(l.down_proj);
  const auto s_gu = GroupScales(job, layer, cpu::LinearInput::kGateUp, "gate_up", {&gate, &up}, true);
  const auto s_down = GroupScales(job, layer, cpu::LinearInput::kDown, "down", {&down}, true);
  gate.ScaleColumns(s_gu);
  up.ScaleColumns(s_gu);
  FoldDivide(l.post_attn_norm, s_gu, job.out);
  up.DivideRows(s_down);
  down.ScaleColumns(s_down);
  for (const FloatLinear* f : {&gate, &up, &down}) EmitQuantized(*f, group, job.out);
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
  ERNIE_ASSIGN_OR_RETURN(auto out_ptr,
                         OutputCheckpoint::Create(*model->checkpoint, PlanOutput(model->weights, o), o.output_dir));
  OutputCheckpoint& out = *out_ptr;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const LayerJob job{c, o, acts.empty() ? nullptr : &acts[static_cast<size_t>(i)], pool, out};
    QuantizeLayer(job, i, model->weights.layers[static_cast<size_t>(i)]);
    ERNIE_RETURN_IF_ERROR(out.status());  // a full disk: stop at once, not after every layer
    std::fprintf(stderr, "ernie-quantize: layer %lld/%lld (%.1f s)\n", static_cast<long long>(i + 1),
                 static_cast<long long>(c.num_layers), Seconds(start));
  }
  ERNIE_RETURN_IF_ERROR(out.Finish());
  ERNIE_RETURN_IF_ERROR(CopySideFiles(o.input_dir, o.output_dir, AwqConfig{.group_size = o.group_size}));
  std::fprintf(stderr, "ernie-quantize: wrote %s: %lld bytes of tensors (from %lld) in %.1f s\n", o.output_dir.c_str(),
               static_cast<long long>(out.total_bytes()), static_cast<long long>(model->checkpoint->total_bytes()),
               Seconds(start));
  return absl::OkStatus();
}

}  // namespace ernie::quantize
