#include "engine/cli/generate_flags.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ernie {

std::string GenerateUsage() {
  return "usage: ernie-generate --model DIR --prompt-ids 1,2,3 --max-tokens N [--temperature T] [--seed S]\n"
         "         [--top-logprobs K] [--backend cpu|cuda] [--dump-logits FILE.npy] [--block-size B]\n"
         "         [--prefill-chunk C] [--threads N] [--ignore-eos]\n"
         "Prints one JSON object: {\"token_ids\", \"logprobs\", \"top_logprobs\", \"finish_reason\", \"timing\"}.\n";
}

namespace {

absl::Status Bad(absl::string_view flag, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", why));
}

template <typename T>
absl::Status ParseInt(absl::string_view flag, absl::string_view text, T min, T max, T* out) {
  int64_t v;
  if (!absl::SimpleAtoi(text, &v)) return Bad(flag, absl::StrCat("'", text, "' is not an integer"));
  if (v < static_cast<int64_t>(min) || v > static_cast<int64_t>(max))
    return Bad(flag, absl::StrCat(v, " is outside [", min, ", ", max, "]"));
  *out = static_cast<T>(v);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GenerateFlags> ParseGenerateFlags(const std::vector<std::string>& args) {
  GenerateFlags f;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i], value;
    bool has_inline = false;
    if (auto eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_inline = true;
    }
    auto take = [&]() -> absl::StatusOr<std::string> {
      if (has_inline) return value;
      if (i + 1 >= args.size()) return Bad(flag, "needs a value");
      return args[++i];
    };
    absl::Status s;
    if (flag == "--help" || flag == "-h") {
      f.help = true;
    } else if (flag == "--ignore-eos") {
      f.ignore_eos = true;
    } else if (flag == "--model" || flag == "--backend" || flag == "--dump-logits" || flag == "--prompt-ids" ||
               flag == "--max-tokens" || flag == "--temperature" || flag == "--seed" || flag == "--top-logprobs" ||
               flag == "--block-size" || flag == "--prefill-chunk" || flag == "--threads") {
      auto v = take();
      if (!v.ok()) return v.status();
      if (flag == "--model") {
        f.model_dir = *v;
      } else if (flag == "--backend") {
        if (*v != "cpu" && *v != "cuda" && *v != "auto") return Bad(flag, "must be cpu, cuda or auto");
        f.backend = *v;
      } else if (flag == "--dump-logits") {
        f.dump_logits_path = *v;
      } else if (flag == "--prompt-ids") {
        for (absl::string_view piece : absl::StrSplit(*v, ',')) {
          int32_t id;
          s = ParseInt<int32_t>(flag, absl::StripAsciiWhitespace(piece), 0, INT32_MAX, &id);
          if (!s.ok()) return s;
          f.prompt_ids.push_back(id);
        }
      } else if (flag == "--max-tokens") {
        s = ParseInt<int>(flag, *v, 1, 1 << 20, &f.max_tokens);
      } else if (flag == "--temperature") {
        if (!absl::SimpleAtof(*v, &f.temperature) || !(f.temperature >= 0.0f) || f.temperature > 100.0f)
          return Bad(flag, absl::StrCat("'", *v, "' is not a number in [0, 100]"));
      } else if (flag == "--seed") {
        if (!absl::SimpleAtoi(*v, &f.seed)) return Bad(flag, absl::StrCat("'", *v, "' is not a non-negative integer"));
      } else if (flag == "--top-logprobs") {
        s = ParseInt<int>(flag, *v, 0, 20, &f.top_logprobs);
      } else if (flag == "--block-size") {
        s = ParseInt<int64_t>(flag, *v, 1, 4096, &f.block_size);
      } else if (flag == "--prefill-chunk") {
        s = ParseInt<int64_t>(flag, *v, 0, 1 << 20, &f.prefill_chunk);
      } else if (flag == "--threads") {
        s = ParseInt<int>(flag, *v, 0, 1024, &f.threads);
      }
      if (!s.ok()) return s;
    } else {
      return Bad(flag, "unknown option (see --help)");
    }
  }
  if (f.help) return f;
  if (f.model_dir.empty()) return Bad("--model", "is required");
  if (f.prompt_ids.empty()) return Bad("--prompt-ids", "is required (comma-separated token ids)");
  return f;
}

}  // namespace ernie
