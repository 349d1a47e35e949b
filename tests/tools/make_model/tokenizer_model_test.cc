// Loads the tokenizer.model that ernie-make-model writes, in sentencepiece's
// C++ library and in Debian's Python binding. No abseil include here: Debian's
// sentencepiece and abseil headers cannot share a translation unit.
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>

#include <cstdio>
#include <memory>

#include "nlohmann/json.hpp"
#include "tests/tools/make_model/run_make_model.h"

namespace ernie::make_model {
namespace {

using testing::ReadFile;
using testing::RunMakeModel;
using testing::TempDir;

const std::vector<std::string>& MixedTexts() {
  static const std::vector<std::string> texts = {
      "Hello, world! How are you today?",
      "你好，世界！今天天气很好。",
      "def f(x):\n    return x ** 2  # squares",
      "Order 103424 shipped on 2025-06-30 at 14:05 for $19.99.",
      "emoji 😀🚀🇨🇳 and rare 𠀀𪚥 and accents café Zürich",
      "  leading and  double  spaces\tand a tab",
      "mixed English 中文 한국어 русский",
  };
  return texts;
}

class TokenizerModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = std::make_unique<TempDir>("tokenizer");
    // The tokenizer part of ernie-make-model alone (make_model_cli_test
    // checks that the binary writes these same bytes).
    std::filesystem::create_directories(dir_->path() + "/m");
    const std::string command = std::string("'") + ERNIE_WRITE_TOKENIZER_MODEL_BINARY + "' '" +
                                model_path() + "' '" + ERNIE_MAKE_MODEL_CORPUS_DIR + "'";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    processor_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
    const auto status = processor_->Load(model_path());
    ASSERT_TRUE(status.ok()) << status.ToString();
  }
  static void TearDownTestSuite() {
    processor_.reset();
    dir_.reset();
  }
  static std::string model_path() { return dir_->path() + "/m/tokenizer.model"; }
  void SetUp() override { ASSERT_NE(processor_, nullptr); }

  static std::unique_ptr<TempDir> dir_;
  static std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};
std::unique_ptr<TempDir> TokenizerModelTest::dir_;
std::unique_ptr<sentencepiece::SentencePieceProcessor> TokenizerModelTest::processor_;

TEST_F(TokenizerModelTest, FixedIdsMatchTheErnieRelease) {
  const auto& sp = *processor_;
  EXPECT_EQ(sp.GetPieceSize(), 100295);
  EXPECT_EQ(sp.IdToPiece(0), "<unk>");
  EXPECT_TRUE(sp.IsUnknown(0));
  EXPECT_EQ(sp.unk_id(), 0);
  EXPECT_EQ(sp.bos_id(), 1);
  EXPECT_EQ(sp.eos_id(), 2);
  EXPECT_EQ(sp.pad_id(), -1);  // pad is <unk> (id 0) in the HF files, not a piece of its own
  EXPECT_EQ(sp.IdToPiece(1), "<s>");
  EXPECT_EQ(sp.IdToPiece(2), "</s>");
  EXPECT_TRUE(sp.IsControl(1));
  EXPECT_TRUE(sp.IsControl(2));
  for (int d = 0; d <= 9; ++d) EXPECT_EQ(sp.IdToPiece(3 + d), std::to_string(d));
  for (int b = 0; b < 256; ++b) {
    char expected[8];
    std::snprintf(expected, sizeof(expected), "<0x%02X>", b);
    EXPECT_EQ(sp.IdToPiece(13 + b), expected);
    EXPECT_TRUE(sp.IsByte(13 + b));
  }
  EXPECT_FALSE(sp.IsByte(269));
  EXPECT_FALSE(sp.IsControl(269));
  EXPECT_FALSE(sp.IsUnused(269));
  EXPECT_EQ(sp.IdToPiece(100272), "<|end_of_sentence|>");
  EXPECT_EQ(sp.IdToPiece(100273), "<|begin_of_sentence|>");
  EXPECT_TRUE(sp.IsControl(100272));
  EXPECT_TRUE(sp.IsControl(100273));
  EXPECT_EQ(sp.PieceToId("<mask:1>"), 100275);
  for (int n = 4; n <= 7; ++n) EXPECT_EQ(sp.PieceToId("<mask:" + std::to_string(n) + ">"), 100274 + n);
  EXPECT_TRUE(sp.IsUnused(100271));
}

TEST_F(TokenizerModelTest, AddedTokensDecoderAgreesWithThePieces) {
  TempDir model_dir("tokenizer_config");
  const auto result = RunMakeModel(model_dir / "m" + " --shape demo --seed 5");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(ReadFile(model_dir / "m/tokenizer.model"), ReadFile(model_path()));
  const auto config = nlohmann::json::parse(ReadFile(model_dir / "m/tokenizer_config.json"));
  int checked = 0;
  for (const auto& [id_text, entry] : config["added_tokens_decoder"].items()) {
    const int id = std::stoi(id_text);
    if (id < processor_->GetPieceSize()) {
      EXPECT_EQ(processor_->IdToPiece(id), entry["content"].get<std::string>()) << id;
      ++checked;
    } else {
      // Past the model: sentencepiece must not already know the token.
      EXPECT_EQ(processor_->PieceToId(entry["content"].get<std::string>()), 0) << id;
    }
  }
  EXPECT_EQ(checked, 10);  // <unk> <s> </s>, the two sentence markers, <mask:1>, <mask:4..7>
}

TEST_F(TokenizerModelTest, EncodeDecodeRoundTripsMixedText) {
  for (const std::string& text : MixedTexts()) {
    std::vector<int> ids;
    ASSERT_TRUE(processor_->Encode(text, &ids).ok());
    EXPECT_FALSE(ids.empty());
    for (int id : ids) EXPECT_NE(id, 0) << "byte fallback leaves nothing unknown: " << text;
    std::string decoded;
    ASSERT_TRUE(processor_->Decode(ids, &decoded).ok());
    EXPECT_EQ(decoded, text);
  }
}

TEST_F(TokenizerModelTest, DigitsAreSplitAndUnseenCharactersFallBackToBytes) {
  std::vector<int> ids;
  ASSERT_TRUE(processor_->Encode("2025", &ids).ok());
  EXPECT_EQ(ids, (std::vector<int>{5, 3, 5, 8}));
  ASSERT_TRUE(processor_->Encode("\xe2\x98\x83", &ids).ok());  // U+2603 snowman, not in the corpus
  EXPECT_EQ(ids, (std::vector<int>{13 + 0xe2, 13 + 0x98, 13 + 0x83}));
}

// Debian's python3-sentencepiece must read the file and tokenize exactly as
// the C++ library does.
TEST_F(TokenizerModelTest, PythonSentencePieceEncodesIdentically) {
  if (std::system("/usr/bin/python3 -c 'import sentencepiece' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 has no sentencepiece module";
  }
  const std::string texts_path = dir_->path() + "/texts.json";
  const std::string script_path = dir_->path() + "/encode.py";
  const std::string out_path = dir_->path() + "/ids.json";
  std::ofstream(texts_path) << nlohmann::json(MixedTexts()).dump();
  std::ofstream(script_path) << "import json, sys\n"
                                "import sentencepiece as spm\n"
                                "sp = spm.SentencePieceProcessor(model_file=sys.argv[1])\n"
                                "texts = json.load(open(sys.argv[2], encoding='utf-8'))\n"
                                "out = {'size': sp.get_piece_size(), 'ids': [sp.EncodeAsIds(t) for t in texts]}\n"
                                "json.dump(out, open(sys.argv[3], 'w'))\n";
  const std::string command = "/usr/bin/python3 '" + script_path + "' '" + model_path() + "' '" +
                              texts_path + "' '" + out_path + "'";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const auto python = nlohmann::json::parse(ReadFile(out_path));
  EXPECT_EQ(python["size"], processor_->GetPieceSize());
  ASSERT_EQ(python["ids"].size(), MixedTexts().size());
  for (size_t i = 0; i < MixedTexts().size(); ++i) {
    std::vector<int> ids;
    ASSERT_TRUE(processor_->Encode(MixedTexts()[i], &ids).ok());
    EXPECT_EQ(python["ids"][i].get<std::vector<int>>(), ids) << MixedTexts()[i];
  }
}

}  // namespace
}  // namespace ernie::make_model
