#include "tools/bench/serve/bench_prompts.h"

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace ernie::bench {

namespace {

// Common short English words: most are one or two tokens in any BPE vocabulary.
constexpr const char* kWords[] = {
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not",
    "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they", "you", "were",
    "their", "one", "all", "we", "can", "her", "has", "there", "been", "if", "more", "when", "will", "would",
    "who", "so", "no", "time", "people", "year", "way", "day", "man", "thing", "woman", "life", "child",
    "world", "school", "state", "family", "student", "group", "country", "problem", "hand", "part", "place",
    "case", "week", "company", "system", "program", "question", "work", "government", "number", "night",
    "point", "home", "water", "room", "mother", "area", "money", "story", "fact", "month", "lot", "right",
    "study", "book", "eye", "job", "word", "business", "issue", "side", "kind", "head", "house", "service",
    "friend", "father", "power", "hour", "game", "line", "end", "member", "law", "car", "city", "name",
    "team", "minute", "idea", "kid", "body", "information", "back", "parent", "face", "others", "level",
    "office", "door", "health", "person", "art", "war", "history", "party", "result", "change", "morning",
    "reason", "research", "girl", "guy", "moment", "air", "teacher", "force", "education", "good", "new",
    "first", "last", "long", "great", "little", "own", "other", "old", "big", "high", "different", "small",
    "large", "next", "early", "young", "important", "few", "public", "bad", "same", "able", "go", "make",
    "know", "take", "see", "come", "think", "look", "want", "give", "use", "find", "tell", "ask", "seem",
    "feel", "try", "leave", "call", "keep", "let", "begin", "show", "hear", "play", "run", "move", "live"};

// Short fillers tried when a prompt is a token or two short.
constexpr const char* kFillers[] = {"a", "I", "of", "to", "in", "is", "it", "on", "at", "be", "the", "and", "x", "."};

constexpr const char* kDigits[] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};

// What random prompts are made of: pieces joined by a separator, plus short
// fillers for the last token or two.
struct PiecePool {
  std::vector<std::string> pieces, fillers;
  std::string separator;
};

PiecePool PoolFor(PromptStyle style) {
  if (style == PromptStyle::kDigits) {
    std::vector<std::string> digits(std::begin(kDigits), std::end(kDigits));
    return {digits, digits, ""};
  }
  return {std::vector<std::string>(std::begin(kWords), std::end(kWords)),
          std::vector<std::string>(std::begin(kFillers), std::end(kFillers)), " "};
}

struct ExactResult {
  std::string text;
  int tokens = 0;
};

// Grows or shrinks a word list until /tokenize counts exactly `target`
// tokens; returns the closest it reached within its budget of calls.
absl::StatusOr<ExactResult> FitToTokens(BlockingHttpClient* client, const std::string& model, const PiecePool& pool,
                                        int target, std::mt19937_64& rng, double* tokens_per_word) {
  std::uniform_int_distribution<size_t> pick(0, pool.pieces.size() - 1);
  auto join = [&](const std::vector<std::string>& words) { return absl::StrJoin(words, pool.separator); };
  std::vector<std::string> words;
  const int first = std::max(1, static_cast<int>(target / *tokens_per_word));
  for (int i = 0; i < first; ++i) words.push_back(pool.pieces[pick(rng)]);
  ExactResult best;
  int best_gap = INT32_MAX;
  size_t filler = 0;
  for (int call = 0; call < 48; ++call) {
    const std::string text = join(words);
    auto count = CountTokens(client, model, text);
    if (!count.ok()) return count.status();
    if (call == 0 && !words.empty()) *tokens_per_word = std::max(0.5, static_cast<double>(*count) / words.size());
    const int gap = *count - target;
    if (std::abs(gap) < best_gap) best_gap = std::abs(gap), best = {text, *count};
    if (gap == 0) break;
    if (gap > 0) {
      // Too long: drop about as many words as the excess is worth (at least one).
      const size_t drop = std::max<size_t>(1, static_cast<size_t>(gap / std::max(1.0, *tokens_per_word)));
      words.resize(words.size() > drop ? words.size() - drop : 1);
      if (gap <= 2 && words.size() > 1) words.back() = pool.fillers[filler++ % pool.fillers.size()];
    } else if (-gap > 2) {
      const int add = std::max(1, static_cast<int>(-gap / *tokens_per_word));
      for (int i = 0; i < add; ++i) words.push_back(pool.pieces[pick(rng)]);
    } else {
      words.push_back(pool.fillers[filler++ % pool.fillers.size()]);
    }
  }
  return best;
}

absl::StatusOr<std::vector<BenchPrompt>> ReadDatasetFile(const std::string& path, int output_len) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--dataset ", path, ": cannot open"));
  std::stringstream whole;
  whole << in.rdbuf();
  const std::string text = whole.str();
  std::vector<BenchPrompt> out;
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return absl::InvalidArgumentError(absl::StrCat("--dataset ", path, ": empty"));
  try {
    if (text[first] == '[') {
      // ShareGPT: [{"conversations": [{"from": "human", "value": "..."}, ...]}, ...]
      const auto root = nlohmann::json::parse(text);
      for (const auto& item : root) {
        if (!item.is_object() || !item.contains("conversations")) continue;
        for (const auto& turn : item["conversations"]) {
          if (turn.value("from", "") == "human" && turn.contains("value") && turn["value"].is_string()) {
            out.push_back({turn["value"].get<std::string>(), 0, output_len});
            break;
          }
        }
      }
    } else {
      std::istringstream lines(text);
      std::string line;
      int line_no = 0;
      while (std::getline(lines, line)) {
        ++line_no;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const auto row = nlohmann::json::parse(line);
        if (!row.is_object() || !row.contains("prompt") || !row["prompt"].is_string())
          return absl::InvalidArgumentError(absl::StrCat("--dataset ", path, ":", line_no, ": expected {\"prompt\": \"...\"}"));
        int len = output_len;
        if (row.contains("output_len")) {
          if (!row["output_len"].is_number_integer() || row["output_len"].get<int>() < 1)
            return absl::InvalidArgumentError(absl::StrCat("--dataset ", path, ":", line_no, ": output_len must be an integer >= 1"));
          len = row["output_len"].get<int>();
        }
        out.push_back({row["prompt"].get<std::string>(), 0, len});
      }
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("--dataset ", path, ": ", e.what()));
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat("--dataset ", path, ": no prompts found"));
  return out;
}

}  // namespace

absl::StatusOr<int> CountTokens(BlockingHttpClient* client, const std::string& model, const std::string& text) {
  const nlohmann::json body = {{"model", model}, {"prompt", text}, {"content", text}, {"add_special_tokens", false}};
  auto reply = client->Post("/tokenize", body.dump());
  if (!reply.ok()) return reply.status();
  if (reply->status == 404 || reply->status == 405) return absl::NotFoundError("the server has no POST /tokenize");
  if (reply->status != 200)
    return absl::FailedPreconditionError(absl::StrCat("POST /tokenize answered ", reply->status, ": ", reply->body.substr(0, 300)));
  try {
    const auto json = nlohmann::json::parse(reply->body);
    if (json.contains("count") && json["count"].is_number_integer()) return json["count"].get<int>();
    if (json.contains("tokens") && json["tokens"].is_array()) return static_cast<int>(json["tokens"].size());
  } catch (const nlohmann::json::exception& e) {
    return absl::FailedPreconditionError(absl::StrCat("POST /tokenize: unreadable answer: ", e.what()));
  }
  return absl::FailedPreconditionError("POST /tokenize: the answer has neither \"count\" nor \"tokens\"");
}

absl::StatusOr<PromptSet> MakeRandomPrompts(BlockingHttpClient* client, const std::string& model, PromptStyle style,
                                            int num, int input_len, int output_len, uint64_t seed) {
  PromptSet set;
  const PiecePool pool = PoolFor(style);
  double tokens_per_word = 1.3;
  int off = 0, worst = 0;
  for (int i = 0; i < num; ++i) {
    std::mt19937_64 rng(seed * 1000003u + static_cast<uint64_t>(i));
    auto fit = FitToTokens(client, model, pool, input_len, rng, &tokens_per_word);
    if (!fit.ok() && absl::IsNotFound(fit.status())) {
      // No /tokenize (e.g. an OpenAI-only server): one word is about one token.
      set.exact = false;
      set.warnings.push_back(absl::StrCat("the server has no POST /tokenize: prompts of about ", input_len,
                                          " tokens (one word or digit each), not exact"));
      set.prompts.clear();
      std::uniform_int_distribution<size_t> pick(0, pool.pieces.size() - 1);
      for (int j = 0; j < num; ++j) {
        std::mt19937_64 r(seed * 1000003u + static_cast<uint64_t>(j));
        std::vector<std::string> words;
        for (int w = 0; w < input_len; ++w) words.push_back(pool.pieces[pick(r)]);
        set.prompts.push_back({absl::StrJoin(words, pool.separator), input_len, output_len});
      }
      return set;
    }
    if (!fit.ok()) return fit.status();
    if (fit->tokens != input_len) {
      ++off;
      worst = std::max(worst, std::abs(fit->tokens - input_len));
    }
    set.prompts.push_back({fit->text, fit->tokens, output_len});
  }
  if (off > 0) {
    set.exact = false;
    set.warnings.push_back(absl::StrCat(off, " of ", num, " prompts miss ", input_len, " tokens by up to ", worst));
  }
  return set;
}

absl::StatusOr<PromptSet> LoadDatasetPrompts(BlockingHttpClient* client, const std::string& model,
                                             const std::string& path, int num, int output_len) {
  auto rows = ReadDatasetFile(path, output_len);
  if (!rows.ok()) return rows.status();
  PromptSet set;
  for (int i = 0; i < num; ++i) set.prompts.push_back((*rows)[static_cast<size_t>(i) % rows->size()]);
  // Count each distinct prompt once.
  for (size_t i = 0; i < set.prompts.size() && i < rows->size(); ++i) {
    auto count = CountTokens(client, model, set.prompts[i].text);
    if (absl::IsNotFound(count.status())) {
      set.exact = false;
      set.warnings.push_back("the server has no POST /tokenize: input token counts come from the usage reports only");
      break;
    }
    if (!count.ok()) return count.status();
    for (size_t j = i; j < set.prompts.size(); j += rows->size()) set.prompts[j].prompt_tokens = *count;
  }
  return set;
}

}  // namespace ernie::bench
