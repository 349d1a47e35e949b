#include "tools/quantize/model_runner.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/util/status_macros.h"
#include "services/tokenizer/tokenizer.h"

namespace ernie::quantize {

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<std::vector<int32_t>> TokensForModel(const std::string& model_dir, const std::string& text,
                                                    int64_t vocab_size, int64_t max_tokens) {
  std::vector<int32_t> ids;
  if (std::filesystem::exists(std::filesystem::path(model_dir) / "tokenizer.model")) {
    ERNIE_ASSIGN_OR_RETURN(auto tokenizer, tokenizer::Tokenizer::Load(model_dir));
    ERNIE_ASSIGN_OR_RETURN(tokenizer::Encoding enc, tokenizer->Encode(text, tokenizer::EncodeOptions{}));
    ids = std::move(enc.ids);
    for (int32_t& id : ids)
      if (id >= vocab_size) id = static_cast<int32_t>(id % vocab_size);  // tokenizer larger than a toy model
  } else {
    if (vocab_size < 4) return absl::InvalidArgumentError(absl::StrCat(model_dir, ": vocabulary too small"));
    for (unsigned char c : text) ids.push_back(static_cast<int32_t>(3 + c % (vocab_size - 3)));
  }
  if (static_cast<int64_t>(ids.size()) > max_tokens) ids.resize(static_cast<size_t>(max_tokens));
  if (ids.empty()) return absl::InvalidArgumentError("calibration text gives no tokens");
  return ids;
}

absl::StatusOr<std::unique_ptr<cpu::CpuBackend>> CreateRunnerBackend(const LoadedModel& model, int64_t tokens,
                                                                      int threads, cpu::LinearInputObserver observer) {
  constexpr int64_t kBlock = 16;
  return cpu::CpuBackend::Create(model, {.num_threads = threads,
                                         .block_size = kBlock,
                                         .num_blocks = (tokens + kBlock - 1) / kBlock + 1,
                                         .max_tokens_per_step = kRunnerChunk,
                                         .observer = std::move(observer)});
}

absl::Status RunSequence(cpu::CpuBackend& backend, const std::vector<int32_t>& tokens, int64_t chunk,
                         std::vector<float>* logits) {
  const int64_t n = static_cast<int64_t>(tokens.size()), block = backend.kv_shape().block_size;
  std::vector<int32_t> table(static_cast<size_t>((n + block - 1) / block));
  std::iota(table.begin(), table.end(), 0);
  const int64_t vocab = backend.vocab_size();
  if (logits) logits->assign(static_cast<size_t>(n * vocab), 0.0f);
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t count = std::min(chunk, n - begin);
    std::vector<int32_t> pos(static_cast<size_t>(count)), rows;
    std::iota(pos.begin(), pos.end(), static_cast<int32_t>(begin));
    if (logits) {
      rows.resize(static_cast<size_t>(count));
      std::iota(rows.begin(), rows.end(), 0);
    }
    const SequenceSlice seq{0, static_cast<int32_t>(count), static_cast<int32_t>(begin),
                            std::span(table).first(static_cast<size_t>((begin + count + block - 1) / block))};
    const StepBatch batch{std::span(tokens).subspan(static_cast<size_t>(begin), static_cast<size_t>(count)), pos,
                          {&seq, 1}, rows};
    std::span<float> out;
    if (logits) out = std::span(*logits).subspan(static_cast<size_t>(begin * vocab), static_cast<size_t>(count * vocab));
    ERNIE_RETURN_IF_ERROR(backend.Forward(batch, out));
  }
  return absl::OkStatus();
}

}  // namespace ernie::quantize
