// The tokenizer gRPC service on loopback: a real server on port 0, every
// RPC (DecodeStream included), grpc.health.v1 Check, and the error statuses.
#include "services/tokenizer/tokenizer_server.h"

#include <gtest/gtest.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/security/credentials.h>

#include <future>

#include "services/tokenizer/detokenizer/incremental_detokenizer.h"
#include "tests/services/tokenizer/demo_model.h"

namespace ernie::tokenizer {
namespace {

using ernie::v1::Tokenizer;

class TokenizerServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto loaded = ernie::tokenizer::Tokenizer::Load(testing::DemoModelDir());
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tokenizer_ = new std::shared_ptr<const ernie::tokenizer::Tokenizer>(std::move(loaded).value());
    auto server = TokenizerServer::Start(*tokenizer_, {.port = 0, .service = {.max_input_bytes = 4096}});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(server).value().release();
    channel_ = new std::shared_ptr<grpc::Channel>(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }
  static void TearDownTestSuite() {
    delete channel_;
    delete server_;
    delete tokenizer_;
  }
  std::unique_ptr<Tokenizer::Stub> Stub() { return Tokenizer::NewStub(*channel_); }

  static std::shared_ptr<const ernie::tokenizer::Tokenizer>* tokenizer_;
  static TokenizerServer* server_;
  static std::shared_ptr<grpc::Channel>* channel_;
};
std::shared_ptr<const ernie::tokenizer::Tokenizer>* TokenizerServiceTest::tokenizer_ = nullptr;
TokenizerServer* TokenizerServiceTest::server_ = nullptr;
std::shared_ptr<grpc::Channel>* TokenizerServiceTest::channel_ = nullptr;

TEST_F(TokenizerServiceTest, EncodeAndDecodeRoundTrip) {
  auto stub = Stub();
  grpc::ClientContext encode_context;
  ernie::v1::EncodeRequest request;
  request.set_text("你好 world<|end_of_sentence|>");
  request.set_parse_special_tokens(true);
  request.set_return_offsets(true);
  ernie::v1::EncodeResponse response;
  ASSERT_TRUE(stub->Encode(&encode_context, request, &response).ok());
  auto expected = (*tokenizer_)->Encode(request.text(), {.parse_special_tokens = true});
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(std::vector<int32_t>(response.ids().begin(), response.ids().end()), expected->ids);
  EXPECT_EQ(response.ids(response.ids_size() - 1), 100272);
  EXPECT_EQ(response.offsets_size(), 2 * response.ids_size());
  EXPECT_EQ(response.offsets(response.offsets_size() - 1), static_cast<int32_t>(request.text().size()));

  grpc::ClientContext decode_context;
  ernie::v1::DecodeRequest decode;
  decode.mutable_ids()->CopyFrom(response.ids());
  decode.set_skip_special_tokens(true);
  ernie::v1::DecodeResponse decoded;
  ASSERT_TRUE(stub->Decode(&decode_context, decode, &decoded).ok());
  EXPECT_EQ(decoded.text(), "你好 world");
}

TEST_F(TokenizerServiceTest, ChatTemplateAndChatEncode) {
  auto stub = Stub();
  ernie::v1::ApplyChatTemplateRequest request;
  request.mutable_chat()->set_messages_json(R"([{"role":"system","content":"Sys."},{"role":"user","content":"Hi"}])");
  request.mutable_chat()->set_add_generation_prompt(true);
  request.set_tokenize(true);
  grpc::ClientContext context;
  ernie::v1::ApplyChatTemplateResponse response;
  ASSERT_TRUE(stub->ApplyChatTemplate(&context, request, &response).ok());
  EXPECT_EQ(response.prompt(), "<|begin_of_sentence|>Sys.\nUser: Hi\nAssistant: ");
  ASSERT_GT(response.ids_size(), 1);
  EXPECT_EQ(response.ids(0), 100273);

  ernie::v1::EncodeRequest encode;
  *encode.mutable_chat() = request.chat();
  grpc::ClientContext encode_context;
  ernie::v1::EncodeResponse encoded;
  ASSERT_TRUE(stub->Encode(&encode_context, encode, &encoded).ok());
  EXPECT_EQ(encoded.text(), response.prompt());
  EXPECT_EQ(std::vector<int32_t>(encoded.ids().begin(), encoded.ids().end()),
            std::vector<int32_t>(response.ids().begin(), response.ids().end()));
}

TEST_F(TokenizerServiceTest, InfoAndVocabulary) {
  auto stub = Stub();
  grpc::ClientContext info_context;
  ernie::v1::TokenizerInfo info;
  ASSERT_TRUE(stub->Info(&info_context, {}, &info).ok());
  EXPECT_EQ(info.vocab_size(), 101309);
  EXPECT_EQ(std::vector<int32_t>(info.eos_token_ids().begin(), info.eos_token_ids().end()),
            (std::vector<int32_t>{2, 100272}));
  EXPECT_TRUE(info.has_chat_template());
  EXPECT_EQ(info.max_input_bytes(), 4096);
  EXPECT_EQ(info.model_max_length(), 131072);
  bool saw_eos = false;
  for (const auto& token : info.special_tokens()) saw_eos |= token.name() == "eos_token" && token.id() == 2;
  EXPECT_TRUE(saw_eos);

  grpc::ClientContext vocabulary_context;
  ernie::v1::Vocabulary vocabulary;
  ASSERT_TRUE(stub->GetVocabulary(&vocabulary_context, {}, &vocabulary).ok());
  EXPECT_EQ(vocabulary.pieces_size(), 101309);
  EXPECT_EQ(vocabulary.vocabulary_hash(), info.vocabulary_hash());
  EXPECT_EQ(vocabulary.pieces(13).type(), ernie::v1::VocabularyPiece::BYTE);
  EXPECT_TRUE(vocabulary.pieces(100295).added());
  // The gateway's path: rebuild the vocabulary from the message; same hash, same decoding.
  Vocabulary rebuilt;
  for (const auto& piece : vocabulary.pieces()) {
    rebuilt.pieces.push_back({piece.piece(), static_cast<PieceType>(piece.type()), piece.special(), piece.added()});
  }
  rebuilt.bos_id = vocabulary.bos_id();
  rebuilt.add_dummy_prefix = vocabulary.add_dummy_prefix();
  rebuilt.remove_extra_whitespaces = vocabulary.remove_extra_whitespaces();
  EXPECT_EQ(VocabularyHash(rebuilt), vocabulary.vocabulary_hash());
}

TEST_F(TokenizerServiceTest, DecodeStreamEmitsWholeCharactersAndTheTail) {
  auto stub = Stub();
  grpc::ClientContext context;
  auto stream = stub->DecodeStream(&context);
  // 中 as byte pieces, split across messages, then a special, then a cut-off byte.
  const std::vector<std::vector<int32_t>> messages = {{13 + 0xE4}, {13 + 0xB8, 13 + 0xAD}, {100272}, {13 + 0xE4}};
  const std::vector<std::string> expected = {"", "中", "<|end_of_sentence|>", ""};
  for (size_t i = 0; i < messages.size(); ++i) {
    ernie::v1::DecodeStreamRequest request;
    for (int32_t id : messages[i]) request.add_ids(id);
    ASSERT_TRUE(stream->Write(request));
    ernie::v1::DecodeStreamResponse response;
    ASSERT_TRUE(stream->Read(&response));
    EXPECT_EQ(response.text_delta(), expected[i]) << i;
  }
  stream->WritesDone();
  ernie::v1::DecodeStreamResponse tail;
  ASSERT_TRUE(stream->Read(&tail));
  EXPECT_EQ(tail.text_delta(), "\xEF\xBF\xBD");
  EXPECT_FALSE(stream->Read(&tail));
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(TokenizerServiceTest, DecodeStreamRejectsUnknownIds) {
  auto stub = Stub();
  grpc::ClientContext context;
  auto stream = stub->DecodeStream(&context);
  ernie::v1::DecodeStreamRequest request;
  request.add_ids(999999);
  stream->Write(request);
  ernie::v1::DecodeStreamResponse response;
  EXPECT_FALSE(stream->Read(&response));
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("999999"), std::string::npos);
}

TEST_F(TokenizerServiceTest, ErrorStatuses) {
  auto stub = Stub();
  {
    grpc::ClientContext context;
    ernie::v1::DecodeRequest request;
    request.add_ids(101309);
    ernie::v1::DecodeResponse response;
    const grpc::Status status = stub->Decode(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("101309"), std::string::npos);
  }
  {
    grpc::ClientContext context;
    ernie::v1::EncodeRequest request;
    request.set_text(std::string("bad \xFF utf8"));
    ernie::v1::EncodeResponse response;
    // proto3 string fields cannot carry invalid UTF-8: protobuf rejects the
    // message before the handler runs (the library's InvalidArgument covers
    // in-process callers). The server must simply survive it.
    EXPECT_FALSE(stub->Encode(&context, request, &response).ok());
    grpc::ClientContext again;
    request.set_text("fine");
    EXPECT_TRUE(stub->Encode(&again, request, &response).ok());
  }
  {
    grpc::ClientContext context;
    ernie::v1::EncodeRequest request;
    request.set_text(std::string(5000, 'a'));  // the server allows 4096
    ernie::v1::EncodeResponse response;
    const grpc::Status status = stub->Encode(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_NE(status.error_message().find("max-input-bytes"), std::string::npos);
  }
  {
    grpc::ClientContext context;
    ernie::v1::ApplyChatTemplateRequest request;
    request.mutable_chat()->set_messages_json("[]");
    request.mutable_chat()->set_template_name("rag");
    ernie::v1::ApplyChatTemplateResponse response;
    const grpc::Status status = stub->ApplyChatTemplate(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("unknown chat template 'rag'"), std::string::npos);
  }
  {
    grpc::ClientContext context;
    ernie::v1::ApplyChatTemplateRequest request;
    request.mutable_chat()->set_messages_json("{not json");
    ernie::v1::ApplyChatTemplateResponse response;
    const grpc::Status status = stub->ApplyChatTemplate(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("messages_json"), std::string::npos);
  }
  {
    grpc::ClientContext context;
    ernie::v1::ApplyChatTemplateRequest request;
    request.mutable_chat()->set_messages_json(std::string(200, '[') + std::string(200, ']'));
    ernie::v1::ApplyChatTemplateResponse response;
    const grpc::Status status = stub->ApplyChatTemplate(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("messages_json nests arrays and objects deeper than"), std::string::npos);
  }
}

// grpc.health.v1.Health/Check through a generic stub: the request is an
// empty HealthCheckRequest, SERVING is the response bytes 08 01.
TEST_F(TokenizerServiceTest, HealthCheckIsServing) {
  grpc::GenericStub generic(*channel_);
  for (const std::string service : {"", "ernie.v1.Tokenizer"}) {
    grpc::ClientContext context;
    std::string request_bytes;
    if (!service.empty()) request_bytes = std::string("\x0A", 1) + static_cast<char>(service.size()) + service;
    grpc::Slice slice(request_bytes);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    std::promise<grpc::Status> done;
    generic.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                      [&](grpc::Status status) { done.set_value(status); });
    const grpc::Status status = done.get_future().get();
    ASSERT_TRUE(status.ok()) << status.error_message();
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(response.Dump(&slices).ok());
    std::string bytes;
    for (const grpc::Slice& part : slices) bytes.append(reinterpret_cast<const char*>(part.begin()), part.size());
    EXPECT_EQ(bytes, std::string("\x08\x01", 2)) << "service '" << service << "'";
  }
}

}  // namespace
}  // namespace ernie::tokenizer
