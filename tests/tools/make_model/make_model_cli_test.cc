// Runs the ernie-make-model binary end to end on the demo shape.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>

#include "engine/model/model_config.h"
#include "nlohmann/json.hpp"
#include "tests/tools/make_model/run_make_model.h"
#include "tools/make_model/ernie_special_tokens.h"
#include "tools/make_model/model_shape.h"

namespace ernie::make_model {
namespace {

using testing::ReadFile;
using testing::RunMakeModel;
using testing::TempDir;
using Json = nlohmann::json;

Json ReadJson(const std::string& path) { return Json::parse(ReadFile(path)); }

// Parses a safetensors file's header and checks the invariants every file
// must meet: 8-byte aligned header, offsets contiguous from 0 in name order,
// sizes = numel * element size, file length = header + data.
Json CheckSafetensorsFile(const std::string& path, size_t element_bytes) {
  const std::string file = ReadFile(path);
  EXPECT_GE(file.size(), 8u) << path;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(file[i]);
  EXPECT_EQ(n % 8, 0u) << path;
  const Json header = Json::parse(file.substr(8, n));
  EXPECT_EQ(header["__metadata__"], Json({{"format", "pt"}})) << path;
  uint64_t expected_begin = 0;
  for (const auto& [name, entry] : header.items()) {  // nlohmann iterates keys sorted
    if (name == "__metadata__") continue;
    uint64_t numel = 1;
    for (int64_t d : entry["shape"]) numel *= d;
    const uint64_t begin = entry["data_offsets"][0], end = entry["data_offsets"][1];
    EXPECT_EQ(begin, expected_begin) << name;
    EXPECT_EQ(end - begin, numel * element_bytes) << name;
    expected_begin = end;
  }
  EXPECT_EQ(file.size(), 8 + n + expected_begin) << path;
  return header;
}

class MakeModelCliTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    demo_ = std::make_unique<TempDir>("cli_demo");
    demo_result_ = RunMakeModel(demo_->path() + "/model --shape demo --seed 7");
  }
  static void TearDownTestSuite() { demo_.reset(); }
  static std::string Demo(const std::string& file) { return demo_->path() + "/model/" + file; }

  static std::unique_ptr<TempDir> demo_;
  static testing::CommandResult demo_result_;
};
std::unique_ptr<TempDir> MakeModelCliTest::demo_;
testing::CommandResult MakeModelCliTest::demo_result_;

TEST_F(MakeModelCliTest, DemoWritesTheHuggingFaceFileSet) {
  ASSERT_EQ(demo_result_.exit_code, 0) << demo_result_.output;
  for (const char* file : {"config.json", "generation_config.json", "model.safetensors", "tokenizer.model",
                           "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json"}) {
    EXPECT_TRUE(std::filesystem::exists(Demo(file))) << file;
  }
  EXPECT_FALSE(std::filesystem::exists(Demo("model.safetensors.index.json")));
}

TEST_F(MakeModelCliTest, DemoSafetensorsHoldsEveryTensorOfTheShape) {
  ASSERT_EQ(demo_result_.exit_code, 0) << demo_result_.output;
  const Json header = CheckSafetensorsFile(Demo("model.safetensors"), 2);
  const auto tensors = DenseTensorList(*ShapeByName("demo"));
  EXPECT_EQ(header.size(), tensors.size() + 1);
  for (const TensorEntry& t : tensors) {
    ASSERT_TRUE(header.contains(t.name)) << t.name;
    EXPECT_EQ(header[t.name]["dtype"], "BF16");
    EXPECT_EQ(header[t.name]["shape"].get<std::vector<int64_t>>(), t.shape) << t.name;
  }
}

TEST_F(MakeModelCliTest, ConfigJsonIsSpelledLikeBaidusRelease) {
  ASSERT_EQ(demo_result_.exit_code, 0) << demo_result_.output;
  const Json config = ReadJson(Demo("config.json"));
  EXPECT_EQ(config["architectures"], Json({"Ernie4_5_ForCausalLM"}));
  EXPECT_EQ(config["model_type"], "ernie4_5");
  EXPECT_EQ(config["hidden_size"], 256);
  EXPECT_EQ(config["num_hidden_layers"], 4);
  EXPECT_EQ(config["num_attention_heads"], 4);
  EXPECT_EQ(config["num_key_value_heads"], 2);
  EXPECT_EQ(config["head_dim"], 64);
  EXPECT_EQ(config["intermediate_size"], 768);
  EXPECT_EQ(config["vocab_size"], 103424);
  EXPECT_EQ(config["max_position_embeddings"], 131072);
  EXPECT_EQ(config["rope_theta"], 500000);
  EXPECT_EQ(config["rms_norm_eps"], 1e-5);
  EXPECT_EQ(config["hidden_act"], "silu");
  EXPECT_EQ(config["tie_word_embeddings"], true);
  EXPECT_EQ(config["use_bias"], false);
  EXPECT_EQ(config["torch_dtype"], "bfloat16");
  EXPECT_EQ(config["bos_token_id"], 1);
  EXPECT_EQ(config["eos_token_id"], 2);
  EXPECT_EQ(config["pad_token_id"], 0);
  EXPECT_EQ(config["auto_map"]["AutoModelForCausalLM"], "modeling_ernie4_5.Ernie4_5_ForCausalLM");

  const Json generation = ReadJson(Demo("generation_config.json"));
  EXPECT_EQ(generation["do_sample"], true);
  EXPECT_EQ(generation["top_p"], 0.8);
  EXPECT_EQ(generation["temperature"], 0.8);
  EXPECT_EQ(generation["repetition_penalty"], 1.0);
  EXPECT_EQ(generation["frequency_penalty"], 0.0);
  EXPECT_EQ(generation["presence_penalty"], 0.0);
  EXPECT_EQ(generation["eos_token_id"], 2);
}

TEST_F(MakeModelCliTest, TokenizerConfigListsTheSpecialTokensAtTheirIds) {
  ASSERT_EQ(demo_result_.exit_code, 0) << demo_result_.output;
  const Json config = ReadJson(Demo("tokenizer_config.json"));
  EXPECT_EQ(config["add_bos_token"], false);
  EXPECT_EQ(config["add_eos_token"], false);
  EXPECT_EQ(config["legacy"], true);
  EXPECT_EQ(config["tokenizer_class"], "Ernie4_5_Tokenizer");
  EXPECT_EQ(config["bos_token"], "<s>");
  EXPECT_EQ(config["eos_token"], "</s>");
  EXPECT_EQ(config["pad_token"], "<unk>");
  EXPECT_EQ(config["unk_token"], "<unk>");
  EXPECT_EQ(config["cls_token"], "<|begin_of_sentence|>");
  EXPECT_EQ(config["sep_token"], "<|end_of_sentence|>");
  EXPECT_EQ(config["mask_token"], "<mask:1>");
  EXPECT_NE(config["chat_template"].get<std::string>().find("\"User: \""), std::string::npos);
  const Json& decoder = config["added_tokens_decoder"];
  auto content = [&](int id) { return decoder[std::to_string(id)]["content"].get<std::string>(); };
  EXPECT_EQ(content(0), "<unk>");
  EXPECT_EQ(content(1), "<s>");
  EXPECT_EQ(content(2), "</s>");
  EXPECT_EQ(content(100272), "<|end_of_sentence|>");
  EXPECT_EQ(content(100273), "<|begin_of_sentence|>");
  EXPECT_EQ(content(100275), "<mask:1>");
  EXPECT_EQ(content(100278), "<mask:4>");
  EXPECT_EQ(content(100281), "<mask:7>");
  EXPECT_EQ(content(100295), "<|IMAGE_PLACEHOLDER|>");
  EXPECT_EQ(content(100296), "<|AUDIO_PLACEHOLDER|>");
  EXPECT_EQ(content(100297), "<|LOC_0|>");
  EXPECT_EQ(content(101297), "<|LOC_1000|>");
  EXPECT_EQ(content(101305), "<|IMAGE_START|>");
  EXPECT_EQ(content(101306), "<|IMAGE_END|>");
  for (const auto& [id, entry] : decoder.items()) {
    EXPECT_EQ(entry["special"], true) << id;
    EXPECT_LT(std::stoi(id), 103424) << "every id must have an embedding row";
  }
  const Json added = ReadJson(Demo("added_tokens.json"));
  EXPECT_EQ(added["<|LOC_1000|>"], 101297);
  EXPECT_FALSE(added.contains("<|end_of_sentence|>"));  // a piece of tokenizer.model itself
  const Json map = ReadJson(Demo("special_tokens_map.json"));
  EXPECT_EQ(map["sep_token"], "<|end_of_sentence|>");
  EXPECT_EQ(map["additional_special_tokens"], config["additional_special_tokens"]);
}

TEST_F(MakeModelCliTest, SameSeedIsByteIdenticalAndAnotherSeedChangesOnlyWeights) {
  ASSERT_EQ(demo_result_.exit_code, 0) << demo_result_.output;
  TempDir again("cli_again");
  ASSERT_EQ(RunMakeModel(again / "same" + " --shape demo --seed 7").exit_code, 0);
  ASSERT_EQ(RunMakeModel(again / "other" + " --shape demo --seed 8").exit_code, 0);
  for (const char* file : {"model.safetensors", "tokenizer.model", "config.json", "tokenizer_config.json"}) {
    EXPECT_EQ(ReadFile(Demo(file)), ReadFile(again / ("same/" + std::string(file)))) << file;
  }
  const std::string a = ReadFile(Demo("model.safetensors"));
  const std::string b = ReadFile(again / "other/model.safetensors");
  ASSERT_EQ(a.size(), b.size());
  EXPECT_NE(a, b);
  EXPECT_EQ(ReadFile(Demo("tokenizer.model")), ReadFile(again / "other/tokenizer.model"));
}

TEST(MakeModelCliConfigOnlyTest, TheFullMoeShapeWithoutWeights) {
  TempDir dir("cli_config_only");
  const auto result = RunMakeModel(dir / "m" + " --shape 21b-a3b --seed 1 --config-only");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  for (const char* file : {"config.json", "generation_config.json", "tokenizer.model", "tokenizer_config.json"})
    EXPECT_TRUE(std::filesystem::exists(dir / ("m/" + std::string(file)))) << file;
  EXPECT_FALSE(std::filesystem::exists(dir / "m/model.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir / "m/model.safetensors.index.json"));
  const Json config = ReadJson(dir / "m/config.json");
  EXPECT_EQ(config["architectures"][0], "Ernie4_5_MoeForCausalLM");
  EXPECT_EQ(config["moe_num_experts"], 64);
  EXPECT_EQ(config["hidden_size"], 2560);
}

TEST(MakeModelCliConfigOnlyTest, AwqGroupSizeWritesAQuantizationConfigTheLoaderReads) {
  TempDir dir("cli_config_only_awq");
  const auto result = RunMakeModel(dir / "m" + " --shape 21b-a3b --seed 1 --config-only --awq-group-size 64");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "m/model.safetensors"));
  const Json config = ReadJson(dir / "m/config.json");
  EXPECT_EQ(config["quantization_config"]["quant_method"], "awq");
  EXPECT_EQ(config["quantization_config"]["group_size"], 64);
  auto parsed = LoadModelConfig(dir / "m");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_TRUE(parsed->awq.has_value());
  EXPECT_EQ(parsed->awq->group_size, 64);
  EXPECT_EQ(parsed->moe.num_experts, 64);
}

TEST(MakeModelCliShardTest, SmallShardLimitWritesShardsAndAnIndex) {
  TempDir dir("cli_shards");
  // float16 demo: the embedding (52.9 MB) exceeds the limit alone, the rest fits one shard.
  const auto result = RunMakeModel(dir / "m" + " --shape demo --seed 3 --dtype float16 --max-shard-bytes 20000000");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "m/model.safetensors"));
  const Json index = ReadJson(dir / "m/model.safetensors.index.json");
  const auto tensors = DenseTensorList(*ShapeByName("demo"));
  EXPECT_EQ(index["metadata"]["total_size"], CountParameters(tensors) * 2);
  EXPECT_EQ(index["weight_map"].size(), tensors.size());
  EXPECT_EQ(index["weight_map"]["model.embed_tokens.weight"], "model-00001-of-00002.safetensors");
  EXPECT_EQ(index["weight_map"]["model.norm.weight"], "model-00002-of-00002.safetensors");
  size_t seen = 0;
  for (const char* shard : {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}) {
    const Json header = CheckSafetensorsFile(dir / ("m/" + std::string(shard)), 2);
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") continue;
      EXPECT_EQ(entry["dtype"], "F16");
      EXPECT_EQ(index["weight_map"][name], shard) << name;
      ++seen;
    }
  }
  EXPECT_EQ(seen, tensors.size());
  EXPECT_EQ(ReadJson(dir / "m/config.json")["torch_dtype"], "float16");
}

TEST(MakeModelCliErrorTest, BadArgumentsExitTwoWithAMessage) {
  TempDir dir("cli_errors");
  struct Case {
    std::string args, expected_text;
  };
  for (const Case& c : std::vector<Case>{
           {dir / "x" + " --shape huge --seed 1", "unknown --shape 'huge'"},
           {dir / "x" + " --shape demo", "missing --seed"},
           {dir / "x" + " --shape demo --seed 1 --bogus 3", "unknown flag '--bogus'"},
           {dir / "x" + " --shape demo --seed 1 --dtype int4", "unknown --dtype 'int4'"},
           {"--shape demo --seed 1", "missing the output DIR"}}) {
    const auto result = RunMakeModel(c.args);
    EXPECT_EQ(result.exit_code, 2) << c.args << "\n" << result.output;
    EXPECT_NE(result.output.find(c.expected_text), std::string::npos) << c.args << "\n" << result.output;
    EXPECT_NE(result.output.find("usage:"), std::string::npos) << c.args;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "x"));
}

TEST(MakeModelCliErrorTest, RuntimeFailuresExitOneNamingThePath) {
  TempDir dir("cli_runtime");
  ASSERT_TRUE(std::ofstream(dir / "file") << "not a folder");
  const auto unwritable = RunMakeModel(dir / "file/sub" + " --shape demo --seed 1");
  EXPECT_EQ(unwritable.exit_code, 1) << unwritable.output;
  EXPECT_NE(unwritable.output.find(dir / "file/sub"), std::string::npos) << unwritable.output;

  const auto no_corpus = RunMakeModel(dir / "m" + " --shape demo --seed 1 --corpus " + (dir / "nothing"));
  EXPECT_EQ(no_corpus.exit_code, 1) << no_corpus.output;
  EXPECT_NE(no_corpus.output.find(dir / "nothing"), std::string::npos) << no_corpus.output;
}

}  // namespace
}  // namespace ernie::make_model
