#include "gateway/upstream/tokenizer_client.h"

#include "absl/strings/str_cat.h"
#include "gateway/upstream/grpc_status_map.h"
#include "services/common/grpc_handoff.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace ernie::gateway {
namespace {

constexpr auto kCallTimeout = std::chrono::seconds(30);

absl::Status ToAbsl(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace

tokenizer::Vocabulary VocabularyFromProto(const ernie::v1::Vocabulary& proto) {
  tokenizer::Vocabulary vocabulary;
  vocabulary.pieces.reserve(static_cast<size_t>(proto.pieces_size()));
  for (const ernie::v1::VocabularyPiece& piece : proto.pieces()) {
    tokenizer::VocabularyPiece out;
    out.piece = piece.piece();
    out.type = static_cast<tokenizer::PieceType>(piece.type());
    out.special = piece.special();
    out.added = piece.added();
    vocabulary.pieces.push_back(std::move(out));
  }
  vocabulary.bos_id = proto.bos_id();
  vocabulary.add_dummy_prefix = proto.add_dummy_prefix();
  vocabulary.remove_extra_whitespaces = proto.remove_extra_whitespaces();
  return vocabulary;
}

TokenizerClient::TokenizerClient(const std::string& address, std::shared_ptr<grpc::ChannelCredentials> credentials,
                                 const std::string& tls_server_name) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, 256 << 20);  // the vocabulary is a few MB
  // A restarted server is back within seconds: reconnect soon, not after gRPC's default 2-minute backoff.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  if (!tls_server_name.empty()) args.SetSslTargetNameOverride(tls_server_name);
  channel_ = grpc::CreateCustomChannel(address, credentials ? credentials : grpc::InsecureChannelCredentials(), args);
  stub_ = ernie::v1::Tokenizer::NewStub(channel_);
}

TokenizerClient::~TokenizerClient() { Stop(); }

void TokenizerClient::Start(std::chrono::milliseconds retry) {
  if (fetcher_.joinable()) return;
  fetcher_ = std::thread([this, retry] { FetchLoop(retry); });
}

void TokenizerClient::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (fetcher_.joinable()) fetcher_.join();
}

void TokenizerClient::FetchLoop(std::chrono::milliseconds retry) {
  bool warned = false;
  while (true) {
    const absl::Status status = FetchOnce();
    std::unique_lock<std::mutex> lock(mutex_);
    if (status.ok() || stopping_) return;
    if (!warned) {
      fprintf(stderr, "ernie-gateway: waiting for the tokenizer service: %s\n", std::string(status.message()).c_str());
      warned = true;
    }
    changed_.wait_for(lock, retry, [this] { return stopping_; });
    if (stopping_) return;
  }
}

absl::Status TokenizerClient::FetchOnce() {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
  ernie::v1::Vocabulary proto;
  grpc::Status status = stub_->GetVocabulary(&context, ernie::v1::VocabularyRequest(), &proto);
  if (!status.ok()) return ToAbsl(status);
  absl::StatusOr<std::shared_ptr<const tokenizer::DetokenizerTable>> table =
      tokenizer::DetokenizerTable::Create(VocabularyFromProto(proto));
  if (!table.ok()) return table.status();
  int32_t max_length = 0;
  grpc::ClientContext info_context;
  info_context.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
  ernie::v1::TokenizerInfo info;
  if (stub_->Info(&info_context, ernie::v1::InfoRequest(), &info).ok()) max_length = info.model_max_length();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    table_ = *std::move(table);
    vocab_size_ = proto.pieces_size();
    model_max_length_ = max_length;
  }
  changed_.notify_all();
  return absl::OkStatus();
}

bool TokenizerClient::WaitReady(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return changed_.wait_for(lock, timeout, [this] { return table_ != nullptr; });
}

bool TokenizerClient::ready() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return table_ != nullptr;
}

std::shared_ptr<const tokenizer::DetokenizerTable> TokenizerClient::table() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return table_;
}

int32_t TokenizerClient::vocab_size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return vocab_size_;
}

int32_t TokenizerClient::model_max_length() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return model_max_length_;
}

void TokenizerClient::Encode(const std::string& text, bool add_special_tokens, const std::string& request_id,
                             EncodeDone done) {
  struct Call {
    grpc::ClientContext context;
    ernie::v1::EncodeRequest request;
    ernie::v1::EncodeResponse response;
  };
  auto call = std::make_shared<Call>();
  call->context.AddMetadata("x-request-id", request_id);
  call->context.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
  call->request.set_text(text);
  call->request.set_add_special_tokens(add_special_tokens);
  HandToGrpc(call.get());
  stub_->async()->Encode(&call->context, &call->request, &call->response,
                         [call, done = std::move(done)](grpc::Status status) {
                           TakeFromGrpc(call.get());
                           if (!status.ok()) return done(ToAbsl(status));
                           done(std::vector<int32_t>(call->response.ids().begin(), call->response.ids().end()));
                         });
}

void TokenizerClient::ApplyChatTemplate(const ernie::v1::ChatInput& chat, const std::string& request_id,
                                        EncodeDone done) {
  struct Call {
    grpc::ClientContext context;
    ernie::v1::ApplyChatTemplateRequest request;
    ernie::v1::ApplyChatTemplateResponse response;
  };
  auto call = std::make_shared<Call>();
  call->context.AddMetadata("x-request-id", request_id);
  call->context.set_deadline(std::chrono::system_clock::now() + kCallTimeout);
  *call->request.mutable_chat() = chat;
  call->request.set_tokenize(true);
  HandToGrpc(call.get());
  stub_->async()->ApplyChatTemplate(&call->context, &call->request, &call->response,
                                    [call, done = std::move(done)](grpc::Status status) {
                                      TakeFromGrpc(call.get());
                                      if (!status.ok()) return done(ToAbsl(status));
                                      done(std::vector<int32_t>(call->response.ids().begin(),
                                                                call->response.ids().end()));
                                    });
}

}  // namespace ernie::gateway
