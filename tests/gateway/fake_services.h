// In-process fake Tokenizer and Worker gRPC services for the gateway's
// HTTP-level tests, on real gRPC over loopback. Each records what it was
// sent; the worker plays a script of token chunks set by the test.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ernie/v1/tokenizer.grpc.pb.h"
#include "ernie/v1/worker.grpc.pb.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/server_context.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tests/gateway/fake_services_order.h"
#include "tests/gateway/test_vocabulary.h"

namespace ernie::gateway::testing {

inline std::string Metadata(const grpc::ServerContext& context, const std::string& key) {
  auto it = context.client_metadata().find(key);
  return it == context.client_metadata().end() ? "" : std::string(it->second.data(), it->second.size());
}

class FakeTokenizer final : public ernie::v1::Tokenizer::Service {
 public:
  // Chat prompts are 2 ids per message ([1, 3]); a message containing
  // "LONG" makes 70 ids (over the fake model length of 64).
  grpc::Status ApplyChatTemplate(grpc::ServerContext* context, const ernie::v1::ApplyChatTemplateRequest* request,
                                 ernie::v1::ApplyChatTemplateResponse* response) override {
    FakeHandlerScope order;
    std::lock_guard<std::mutex> lock(mutex);
    last_request_id = Metadata(*context, "x-request-id");
    last_messages_json = request->chat().messages_json();
    const auto messages = nlohmann::json::parse(last_messages_json, nullptr, false);
    if (!messages.is_array()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "messages_json is not an array");
    const int count = last_messages_json.find("LONG") != std::string::npos ? 35 : static_cast<int>(messages.size());
    for (int i = 0; i < count; ++i) {
      response->add_ids(1);
      response->add_ids(3);
    }
    return grpc::Status::OK;
  }
  // "hello" is [3]; "LONG" 70 ids; anything else [3, 4].
  grpc::Status Encode(grpc::ServerContext*, const ernie::v1::EncodeRequest* request,
                      ernie::v1::EncodeResponse* response) override {
    const std::string& text = request->text();
    const int count = text == "LONG" ? 70 : (text == "hello" ? 1 : 2);
    for (int i = 0; i < count; ++i) response->add_ids(3 + (i % 2));
    return grpc::Status::OK;
  }
  grpc::Status Info(grpc::ServerContext*, const ernie::v1::InfoRequest*, ernie::v1::TokenizerInfo* info) override {
    info->set_model_max_length(64);
    return grpc::Status::OK;
  }
  grpc::Status GetVocabulary(grpc::ServerContext*, const ernie::v1::VocabularyRequest*,
                             ernie::v1::Vocabulary* out) override {
    const tokenizer::Vocabulary vocabulary = TestVocabulary();
    for (const auto& piece : vocabulary.pieces) {
      auto* p = out->add_pieces();
      p->set_piece(piece.piece);
      p->set_type(static_cast<ernie::v1::VocabularyPiece::Type>(piece.type));
      p->set_special(piece.special);
      p->set_added(piece.added);
    }
    out->set_bos_id(vocabulary.bos_id);
    out->set_add_dummy_prefix(vocabulary.add_dummy_prefix);
    return grpc::Status::OK;
  }

  std::mutex mutex;
  std::string last_request_id;
  std::string last_messages_json;
};

class FakeWorker final : public ernie::v1::Worker::Service {
 public:
  grpc::Status Generate(grpc::ServerContext* context, const ernie::v1::GenerateRequest* request,
                        grpc::ServerWriter<ernie::v1::GenerateResponse>* writer) override {
    FakeHandlerScope order;
    std::vector<std::vector<int32_t>> script;
    {
      std::lock_guard<std::mutex> lock(mutex);
      last_request = *request;
      last_request_id = Metadata(*context, "x-request-id");
      script = chunks;
    }
    HandToGrpc(&kFakeServicesOrder);  // recorded: the answer may end before this handler returns
    ++generate_calls;
    if (!fail.ok()) return fail;
    for (const ernie::v1::GenerateResponse& response : Script(*request, script))
      if (!writer->Write(response)) break;
    if (hang) {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!context->IsCancelled() && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      saw_cancel = context->IsCancelled();
      return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    }
    return end_with;
  }
  // The same script on a GenerateMany stream: each message its own update,
  // then the request's closing update (fail, end_with); a hanging request
  // stays open until its cancel arrives.
  grpc::Status GenerateMany(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<ernie::v1::GenerateManyResponse, ernie::v1::GenerateManyRequest>* stream) override {
    FakeHandlerScope order;
    std::string hanging;
    ernie::v1::GenerateManyRequest in;
    const auto close = [&](const std::string& id, const grpc::Status& status) {
      ernie::v1::GenerateManyResponse out;
      ernie::v1::GenerateUpdate* update = out.add_updates();
      update->set_request_id(id);
      update->set_closed(true);
      update->set_status_code(status.error_code());
      update->set_status_message(status.error_message());
      const bool written = stream->Write(out);
      ++updates_sent;
      return written;
    };
    while (stream->Read(&in)) {
      // The stream outlives many requests: each message comes after whatever
      // the test set before sending it.
      TakeFromGrpc(&kFakeServicesOrder);
      if (!in.has_start()) {
        if (in.cancel_request_id() == hanging) {
          saw_cancel = true;
          close(hanging, grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
        }
        continue;
      }
      const ernie::v1::GenerateRequest& request = in.start();
      std::vector<std::vector<int32_t>> script;
      {
        std::lock_guard<std::mutex> lock(mutex);
        last_request = request;
        last_request_id = request.request_id();
        script = chunks;
      }
      HandToGrpc(&kFakeServicesOrder);
      ++generate_calls;
      if (!fail.ok()) {
        close(request.request_id(), fail);
        continue;
      }
      for (const ernie::v1::GenerateResponse& response : Script(request, script)) {
        ernie::v1::GenerateManyResponse out;
        ernie::v1::GenerateUpdate* update = out.add_updates();
        update->set_request_id(request.request_id());
        *update->mutable_response() = response;
        stream->Write(out);
        ++updates_sent;
      }
      if (hang) {
        hanging = request.request_id();
        continue;
      }
      close(request.request_id(), end_with);
    }
    if (!hanging.empty() && context->IsCancelled()) saw_cancel = true;
    return grpc::Status::OK;
  }
  grpc::Status Abort(grpc::ServerContext*, const ernie::v1::AbortRequest*, ernie::v1::AbortResponse*) override {
    return grpc::Status::OK;
  }
  grpc::Status GetModelInfo(grpc::ServerContext*, const ernie::v1::GetModelInfoRequest*,
                            ernie::v1::ModelInfo* info) override {
    info->set_max_model_len(64);
    info->set_vocab_size(static_cast<int32_t>(TestVocabulary().pieces.size()));
    info->add_eos_token_ids(2);
    return grpc::Status::OK;
  }
  grpc::Status GetLoad(grpc::ServerContext*, const ernie::v1::GetLoadRequest*, ernie::v1::Load* load) override {
    load->set_running(running.load());
    load->set_kv_blocks_total(100);
    return grpc::Status::OK;
  }

  // The messages the script makes for `request`: each sample's chunks in turn.
  std::vector<ernie::v1::GenerateResponse> Script(const ernie::v1::GenerateRequest& request,
                                                  const std::vector<std::vector<int32_t>>& script) const {
    std::vector<ernie::v1::GenerateResponse> out;
    const int n = std::max(1, request.sampling().n());
    for (int index = 0; index < n; ++index) {
      int produced = 0;
      for (size_t c = 0; c < script.size(); ++c) {
        ernie::v1::GenerateResponse& response = out.emplace_back();
        response.set_index(index);
        for (int32_t id : script[c]) response.add_token_ids(id);
        if (request.sampling().logprobs()) {
          for (int32_t id : script[c]) {
            auto* logprob = response.add_logprobs();
            logprob->set_token_id(id);
            logprob->set_logprob(-0.5f);
            for (int t = 0; t < request.sampling().top_logprobs(); ++t) {
              auto* top = logprob->add_top();
              top->set_token_id(id);
              top->set_logprob(-0.5f - static_cast<float>(t));
            }
          }
        }
        produced += static_cast<int>(script[c].size());
        response.set_prompt_tokens(request.prompt_token_ids_size());
        response.set_completion_tokens(produced);
        response.set_cached_prompt_tokens(1);
        if (c + 1 == script.size() && !hang) response.set_finish_reason(finish);
      }
    }
    return out;
  }

  std::mutex mutex;
  std::vector<std::vector<int32_t>> chunks = {{3}, {4}, {5}};  // "Hello world!"
  ernie::v1::FinishReason finish = ernie::v1::FINISH_REASON_STOP;
  grpc::Status fail = grpc::Status::OK;  // set before the request: returned at once
  bool hang = false;                     // after the script, wait to be cancelled
  grpc::Status end_with = grpc::Status::OK;  // returned after the script (a failure mid-stream)
  std::atomic<int> running{0};
  std::atomic<int> generate_calls{0};
  std::atomic<int> updates_sent{0};  // GenerateMany updates written
  std::atomic<bool> saw_cancel{false};
  ernie::v1::GenerateRequest last_request;
  std::string last_request_id;
};

// A gRPC server on a free loopback port hosting `service`.
struct FakeServer {
  explicit FakeServer(grpc::Service* service) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service);
    server = builder.BuildAndStart();
  }
  ~FakeServer() { server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200)); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port); }

  int port = 0;
  std::unique_ptr<grpc::Server> server;
};

}  // namespace ernie::gateway::testing
