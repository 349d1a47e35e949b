#include "services/tokenizer/decode_stream_reactor.h"

#include "absl/strings/str_cat.h"
#include "services/common/grpc_status.h"

namespace ernie::tokenizer {

DecodeStreamReactor::DecodeStreamReactor(std::shared_ptr<const DetokenizerTable> table, int64_t max_input_bytes)
    : table_(std::move(table)), max_input_bytes_(max_input_bytes) {
  StartRead(&request_);
}

void DecodeStreamReactor::OnReadDone(bool ok) {
  try {
    if (!ok) {  // the client is done sending (or the call is cancelled)
      std::string tail;
      if (detokenizer_ != nullptr) detokenizer_->Finish(&tail);
      if (tail.empty()) {
        Finish(grpc::Status::OK);
      } else {
        response_.set_text_delta(std::move(tail));
        finishing_ = true;
        StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
      }
      return;
    }
    if (static_cast<int64_t>(request_.ids_size()) * 4 > max_input_bytes_) {
      Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          absl::StrCat("DecodeStream message of ", request_.ids_size(),
                                       " ids exceeds --max-input-bytes ", max_input_bytes_, " (4 bytes per id)")));
      return;
    }
    if (detokenizer_ == nullptr) {
      detokenizer_ = std::make_unique<IncrementalDetokenizer>(table_, request_.skip_special_tokens());
    }
    response_.mutable_text_delta()->clear();
    const absl::Status status = detokenizer_->Append(request_.ids(), response_.mutable_text_delta());
    if (!status.ok()) {
      Finish(services::ToGrpcStatus(status));
      return;
    }
    StartWrite(&response_);
  } catch (const std::exception& error) {
    Finish(grpc::Status(grpc::StatusCode::INTERNAL, absl::StrCat("DecodeStream: ", error.what())));
  }
}

void DecodeStreamReactor::OnWriteDone(bool ok) {
  if (finishing_) return;
  if (!ok) {
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "DecodeStream: the client went away"));
    return;
  }
  StartRead(&request_);
}

}  // namespace ernie::tokenizer
