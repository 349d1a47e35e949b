// Encode and decode against Debian's python3-sentencepiece on the same
// tokenizer.model (tests/services/tokenizer/hf_reference.py), on Chinese,
// English, emoji, code and mixed text, and on random id sequences mixing
// byte pieces, control pieces, added and special tokens. Also runs the
// incremental detokenizer over the same ids against the reference.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include <unistd.h>

#include "nlohmann/json.hpp"
#include "services/tokenizer/detokenizer/incremental_detokenizer.h"
#include "services/tokenizer/tokenizer.h"
#include "tests/services/tokenizer/demo_model.h"

namespace ernie::tokenizer {
namespace {

const std::vector<std::string>& Texts() {
  static const std::vector<std::string> texts = {
      "Hello world",
      "  leading and  double  spaces ",
      "你好，世界！今天天气很好。",
      "中文English混合 text, 数字 12345 和标点…",
      "emoji 😀👍🏽 and flags 🇨🇳 👨‍👩‍👧",
      "def f(x):\n    return x * 2  # tab\there\n",
      "#include <vector>\nint main() { return 0; }\n",
      "<|begin_of_sentence|>User: 你好<|end_of_sentence|>Assistant: ",
      "<s>literal</s> and <mask:1><|LOC_5|><|IMAGE_PLACEHOLDER|>x",
      "rare: ʕ•ᴥ•ʔ Ωμέγα ١٢٣ कखग ✓ ∑ \u00a0nbsp",
      "",
      " ",
      "\n\n",
  };
  return texts;
}

std::vector<std::vector<int32_t>> RandomIdLists(const Tokenizer& tokenizer) {
  std::mt19937 rng(7);
  const std::vector<int32_t> interesting = {0, 1, 2, 100272, 100273, 100274, 100275, 100295, 100400, 101308};
  std::vector<std::vector<int32_t>> lists;
  for (int n = 0; n < 300; ++n) {
    std::vector<int32_t> ids;
    const int length = 1 + static_cast<int>(rng() % 24);
    for (int i = 0; i < length; ++i) {
      const uint32_t pick = rng() % 10;
      if (pick < 4) {
        ids.push_back(13 + static_cast<int32_t>(rng() % 256));  // byte pieces, valid or not
      } else if (pick < 5) {
        ids.push_back(interesting[rng() % interesting.size()]);
      } else {
        ids.push_back(static_cast<int32_t>(rng() % 8000));  // trained pieces (incl. the lone ▁)
      }
    }
    lists.push_back(ids);
  }
  // Real encodings, with byte-fallback runs split by specials.
  for (const std::string& text : Texts()) {
    auto encoded = tokenizer.Encode(text, {.parse_special_tokens = true});
    if (encoded.ok()) lists.push_back(encoded->ids);
  }
  return lists;
}

struct Reference {
  nlohmann::json expected;
  std::vector<std::vector<int32_t>> id_lists;
};

// Writes the cases, runs the Python reference and reads its answers.
Reference RunReferenceOn(const std::string& model_dir, const Tokenizer& tokenizer, const std::string& tag) {
  Reference reference;
  reference.id_lists = RandomIdLists(tokenizer);
  const std::filesystem::path work = std::filesystem::temp_directory_path() /
                                     ("ernie_tokenizer_parity_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(work);
  {
    std::ofstream cases(work / "cases.json");
    cases << nlohmann::json{{"texts", Texts()}, {"id_lists", reference.id_lists}}.dump();
  }
  const bool ok = testing::RunReference("expect " + model_dir + " " + (work / "cases.json").string() + " " +
                                        (work / "expected.json").string());
  EXPECT_TRUE(ok) << "hf_reference.py failed";
  if (ok) {
    std::ifstream in(work / "expected.json");
    reference.expected = nlohmann::json::parse(in);
  }
  std::filesystem::remove_all(work);
  return reference;
}

void ExpectParity(const std::string& model_dir, const std::string& tag) {
  auto loaded = Tokenizer::Load(model_dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Tokenizer& tokenizer = **loaded;
  const Reference reference = RunReferenceOn(model_dir, tokenizer, tag);
  ASSERT_FALSE(reference.expected.is_null());
  for (size_t i = 0; i < Texts().size(); ++i) {
    const std::string& text = Texts()[i];
    auto plain = tokenizer.Encode(text, {});
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_EQ(plain->ids, reference.expected["encode"][i].get<std::vector<int32_t>>()) << text;
    auto special = tokenizer.Encode(text, {.parse_special_tokens = true});
    ASSERT_TRUE(special.ok());
    EXPECT_EQ(special->ids, reference.expected["encode_special"][i].get<std::vector<int32_t>>()) << text;
  }
  for (size_t i = 0; i < reference.id_lists.size(); ++i) {
    const std::vector<int32_t>& ids = reference.id_lists[i];
    for (bool skip : {false, true}) {
      const std::string expected = reference.expected[skip ? "decode_skip" : "decode"][i].get<std::string>();
      auto decoded = tokenizer.Decode(ids, skip);
      ASSERT_TRUE(decoded.ok()) << decoded.status();
      EXPECT_EQ(*decoded, expected) << "list " << i << " skip " << skip;
      // The incremental detokenizer, fed one id at a time.
      IncrementalDetokenizer detokenizer(tokenizer.detokenizer_table(), skip);
      std::string streamed;
      for (int32_t id : ids) ASSERT_TRUE(detokenizer.Append({&id, 1}, &streamed).ok());
      detokenizer.Finish(&streamed);
      EXPECT_EQ(streamed, expected) << "list " << i << " skip " << skip;
    }
  }
}

TEST(TokenizerParityTest, MatchesPythonSentencePiece) {
  if (!testing::HavePythonSentencePiece()) GTEST_SKIP() << "/usr/bin/python3 lacks sentencepiece";
  ExpectParity(testing::DemoModelDir(), "demo");
}

// The demo model has add_dummy_prefix off (as ERNIE's); the leading-space
// rule is checked on copies with the normalizer flags turned on.
TEST(TokenizerParityTest, MatchesPythonWithDummyPrefixAndWhitespaceRemoval) {
  if (!testing::HavePythonSentencePiece()) GTEST_SKIP() << "/usr/bin/python3 lacks sentencepiece";
  for (const auto& [adp, rew] : {std::pair{1, 0}, std::pair{1, 1}, std::pair{0, 1}}) {
    const std::string tag = "variant" + std::to_string(adp) + std::to_string(rew);
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("ernie_tokenizer_" + tag + "_" + std::to_string(::getpid()));
    ASSERT_TRUE(testing::RunReference("variant " + testing::DemoModelDir() + " " + dir.string() + " " +
                                      std::to_string(adp) + " " + std::to_string(rew)));
    SCOPED_TRACE(tag);
    ExpectParity(dir.string(), tag);
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace ernie::tokenizer
