#include "tests/tools/quantize/quantize_test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "engine/model/awq_format.h"
#include "engine/model/checkpoint.h"
#include "engine/model/safetensors_writer.h"

namespace ernie::quantize::testing {

namespace fs = std::filesystem;

CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  std::FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

TempDir::TempDir(const std::string& tag) {
  path_ = (fs::temp_directory_path() / ("ernie_" + tag + "_" + std::to_string(getpid()))).string();
  fs::remove_all(path_);
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

TensorMap ReadTensors(const std::string& dir) {
  TensorMap out;
  auto ckpt = Checkpoint::Open(dir);
  if (!ckpt.ok()) return out;
  for (const auto& [name, view] : (*ckpt)->tensors())
    out[name] = OwnedTensor{std::string(DTypeSafetensorsName(view.dtype)), view.shape,
                            std::vector<uint8_t>(view.bytes.begin(), view.bytes.end())};
  return out;
}

std::string EditedCopy(const std::string& src, const std::string& dst,
                       const std::function<void(TensorMap&)>& edit_tensors,
                       const std::function<void(nlohmann::json&)>& edit_config) {
  fs::create_directories(dst);
  for (const auto& entry : fs::directory_iterator(src)) {
    const std::string name = entry.path().filename().string();
    if (name == "config.json" || name.find("safetensors") != std::string::npos) continue;
    fs::copy_file(entry.path(), fs::path(dst) / name, fs::copy_options::overwrite_existing);
  }
  std::ifstream in(fs::path(src) / "config.json");
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json config = nlohmann::json::parse(ss.str(), nullptr, false);
  if (config.is_discarded()) return "config.json is not JSON";
  if (edit_config) edit_config(config);
  std::ofstream(fs::path(dst) / "config.json") << config.dump(2);

  TensorMap tensors = ReadTensors(src);
  if (tensors.empty()) return "no tensors in " + src;
  if (edit_tensors) edit_tensors(tensors);
  std::vector<model::SafetensorsTensorSpec> specs;
  std::vector<const OwnedTensor*> order;
  for (const auto& [name, t] : tensors) {
    specs.push_back({name, t.dtype, t.shape});
    order.push_back(&t);
  }
  const absl::Status s = model::WriteSafetensors(
      (fs::path(dst) / "model.safetensors").string(), specs,
      [&order](size_t i, uint64_t offset, std::span<uint8_t> chunk) {
        std::memcpy(chunk.data(), order[i]->bytes.data() + offset, chunk.size());
        return absl::OkStatus();
      });
  return s.ok() ? "" : std::string(s.message());
}

std::string DequantizedCopy(const std::string& src, const std::string& dst) {
  auto ckpt = Checkpoint::Open(src);
  if (!ckpt.ok()) return std::string(ckpt.status().message());
  int64_t group = 0;
  {
    std::ifstream in(fs::path(src) / "config.json");
    std::stringstream ss;
    ss << in.rdbuf();
    group = nlohmann::json::parse(ss.str())["quantization_config"]["group_size"].get<int64_t>();
  }
  const auto& views = (*ckpt)->tensors();
  return EditedCopy(
      src, dst,
      [&](TensorMap& tensors) {
        std::vector<std::string> prefixes;
        for (const auto& [name, t] : tensors)
          if (name.size() > 8 && name.compare(name.size() - 8, 8, ".qweight") == 0)
            prefixes.push_back(name.substr(0, name.size() - 8));
        for (const std::string& p : prefixes) {
          AwqLinearWeights w{&views.at(p + ".qweight"), &views.at(p + ".qzeros"), &views.at(p + ".scales"), group};
          const int64_t in = w.in_features(), out = w.out_features();
          std::vector<float> wt(static_cast<size_t>(in * out)), w_out_in(static_cast<size_t>(in * out));
          DequantizeAwqRows(w, 0, in, wt.data());
          for (int64_t i = 0; i < in; ++i)
            for (int64_t o = 0; o < out; ++o) w_out_in[static_cast<size_t>(o * in + i)] = wt[static_cast<size_t>(i * out + o)];
          OwnedTensor t{"F32", {out, in}, std::vector<uint8_t>(w_out_in.size() * 4)};
          std::memcpy(t.bytes.data(), w_out_in.data(), t.bytes.size());
          for (const char* part : {".qweight", ".qzeros", ".scales"}) tensors.erase(p + part);
          tensors[p + ".weight"] = std::move(t);
        }
      },
      [](nlohmann::json& config) { config.erase("quantization_config"); });
}

}  // namespace ernie::quantize::testing
