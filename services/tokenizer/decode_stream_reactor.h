// One DecodeStream call: read a message of ids, write its text delta, read
// the next (one response per request, so clients can pair them). When the
// client half-closes, held-back bytes of an unfinished character are written
// as U+FFFD (as a full decode renders them) and the call finishes OK. The
// reactor owns its state and deletes itself in OnDone.
#pragma once

#include <cstdint>
#include <memory>

#include "ernie/v1/tokenizer.grpc.pb.h"
#include "services/tokenizer/detokenizer/incremental_detokenizer.h"

namespace ernie::tokenizer {

class DecodeStreamReactor final
    : public grpc::ServerBidiReactor<ernie::v1::DecodeStreamRequest, ernie::v1::DecodeStreamResponse> {
 public:
  DecodeStreamReactor(std::shared_ptr<const DetokenizerTable> table, int64_t max_input_bytes);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override { delete this; }

 private:
  std::shared_ptr<const DetokenizerTable> table_;
  int64_t max_input_bytes_;
  std::unique_ptr<IncrementalDetokenizer> detokenizer_;  // made on the first message (skip flag)
  ernie::v1::DecodeStreamRequest request_;    // the message being read
  ernie::v1::DecodeStreamResponse response_;  // the delta being written
  bool finishing_ = false;  // StartWriteAndFinish issued: start nothing more
};

}  // namespace ernie::tokenizer
