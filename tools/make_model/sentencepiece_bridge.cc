// No absl includes in this file: see sentencepiece_bridge.h.
#include "tools/make_model/sentencepiece_bridge.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <unistd.h>

#include <cstdio>

namespace ernie::make_model {
namespace {

// Feeds the corpus to the trainer from memory.
class VectorSentenceIterator : public sentencepiece::SentenceIterator {
 public:
  explicit VectorSentenceIterator(const std::vector<std::string>& sentences) : sentences_(sentences) {}
  bool done() const override { return index_ >= sentences_.size(); }
  void Next() override { ++index_; }
  const std::string& value() const override { return sentences_[index_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& sentences_;  // the corpus, owned by the caller
  size_t index_ = 0;                           // next sentence to hand out
};

// Sentencepiece's trainer logs every step to stderr. This sends fd 2 to a
// temporary file while it runs, so a successful build prints nothing and a
// failed one can quote the log. Not thread-safe (it swaps the process's fd 2).
class CapturedStderr {
 public:
  CapturedStderr() {
    std::fflush(stderr);
    capture_ = std::tmpfile();
    if (capture_ == nullptr) return;
    saved_fd_ = dup(STDERR_FILENO);
    if (saved_fd_ >= 0) dup2(fileno(capture_), STDERR_FILENO);
  }
  ~CapturedStderr() {
    Restore();
    if (capture_ != nullptr) std::fclose(capture_);
  }
  CapturedStderr(const CapturedStderr&) = delete;
  CapturedStderr& operator=(const CapturedStderr&) = delete;

  // Restores stderr and returns the last `max_bytes` of what was written.
  std::string Finish(size_t max_bytes = 2000) {
    Restore();
    if (capture_ == nullptr) return "";
    std::string text;
    std::rewind(capture_);
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof(buffer), capture_)) > 0) text.append(buffer, n);
    return text.size() > max_bytes ? text.substr(text.size() - max_bytes) : text;
  }

 private:
  void Restore() {
    if (saved_fd_ < 0) return;
    std::fflush(stderr);
    dup2(saved_fd_, STDERR_FILENO);
    close(saved_fd_);
    saved_fd_ = -1;
  }
  std::FILE* capture_ = nullptr;  // where fd 2 points while capturing
  int saved_fd_ = -1;             // the real stderr, restored by Restore()
};

}  // namespace

bool TrainSentencePiece(const std::string& trainer_args, const std::vector<std::string>& sentences,
                        std::string* serialized_model, std::string* error) {
  VectorSentenceIterator iterator(sentences);
  CapturedStderr captured;
  const sentencepiece::util::Status status =
      sentencepiece::SentencePieceTrainer::Train(trainer_args, &iterator, serialized_model);
  const std::string log = captured.Finish();
  if (status.ok()) return true;
  *error = status.ToString() + "\n--- trainer log (tail) ---\n" + log;
  return false;
}

bool LoadSentencePiece(const std::string& serialized_model, int* piece_count, std::string* error) {
  sentencepiece::SentencePieceProcessor processor;
  const sentencepiece::util::Status status = processor.LoadFromSerializedProto(serialized_model);
  if (!status.ok()) {
    *error = status.ToString();
    return false;
  }
  *piece_count = processor.GetPieceSize();
  return true;
}

}  // namespace ernie::make_model
