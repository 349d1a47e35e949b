// ernie-bench-worker: drives a running ernie-worker (normally with
// --backend instant) with C concurrent Generate streams on loopback and
// reports total streamed tokens/s and per-token latency (time between
// consecutive tokens of a stream, as a client sees them).
//
//   ernie-bench-worker --address 127.0.0.1:50052 --concurrency 256 --requests 1024
//                      --prompt-len 32 --output-len 256 [--log FILE]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ernie/v1/worker.grpc.pb.h"
#include "nlohmann/json.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string address = "127.0.0.1:50052", log;
  int concurrency = 256, requests = 1024, prompt_len = 32, output_len = 256;
};

struct Stats {
  std::mutex mu;
  std::vector<double> gaps_us;  // per token: time since the stream's previous token
  int64_t tokens = 0, messages = 0, failures = 0;
};

class Stream : public grpc::ClientReadReactor<ernie::v1::GenerateResponse> {
 public:
  Stream(ernie::v1::Worker::Stub* stub, const ernie::v1::GenerateRequest& req, Stats* stats, std::function<void()> done)
      : stats_(stats), done_(std::move(done)) {
    stub->async()->Generate(&ctx_, &req, this);
    last_ = Clock::now();
    StartRead(&resp_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    const auto now = Clock::now();
    const double gap = std::chrono::duration<double, std::micro>(now - last_).count();
    last_ = now;
    const int n = resp_.token_ids_size();
    tokens_ += n;
    ++messages_;
    // A message of n tokens: each token waited gap / n on average.
    for (int i = 0; i < n; ++i) gaps_.push_back(gap / n);
    StartRead(&resp_);
  }
  void OnDone(const grpc::Status& s) override {
    {
      std::lock_guard<std::mutex> lock(stats_->mu);
      stats_->tokens += tokens_;
      stats_->messages += messages_;
      if (!s.ok()) ++stats_->failures;
      // Skip the first gap (time to first token), keep inter-token gaps.
      if (gaps_.size() > 1) stats_->gaps_us.insert(stats_->gaps_us.end(), gaps_.begin() + 1, gaps_.end());
    }
    done_();
    delete this;
  }

 private:
  grpc::ClientContext ctx_;
  ernie::v1::GenerateResponse resp_;
  Stats* stats_;
  std::function<void()> done_;
  Clock::time_point last_;
  std::vector<double> gaps_;
  int64_t tokens_ = 0, messages_ = 0;
};

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i], v = argv[i + 1];
    bool ok = true;
    if (f == "--address") a.address = v;
    else if (f == "--log") a.log = v;
    else if (f == "--concurrency") ok = absl::SimpleAtoi(v, &a.concurrency);
    else if (f == "--requests") ok = absl::SimpleAtoi(v, &a.requests);
    else if (f == "--prompt-len") ok = absl::SimpleAtoi(v, &a.prompt_len);
    else if (f == "--output-len") ok = absl::SimpleAtoi(v, &a.output_len);
    else ok = false;
    if (!ok) {
      std::cerr << "ernie-bench-worker: bad option " << f << "\n";
      return 2;
    }
  }
  auto channel = grpc::CreateChannel(a.address, grpc::InsecureChannelCredentials());
  auto stub = ernie::v1::Worker::NewStub(channel);
  Stats stats;
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0, started = 0, finished = 0;
  auto make_request = [&](int i) {
    ernie::v1::GenerateRequest req;
    req.set_request_id(absl::StrCat("bench-", i));
    for (int t = 0; t < a.prompt_len; ++t) req.add_prompt_token_ids(3 + (t * 13 + i * 7) % 400);
    req.mutable_sampling()->set_max_tokens(a.output_len);
    req.mutable_sampling()->set_ignore_eos(true);
    return req;
  };
  const auto start = Clock::now();
  std::unique_lock<std::mutex> lock(mu);
  while (finished < a.requests) {
    while (in_flight < a.concurrency && started < a.requests) {
      ++in_flight;
      const int id = started++;
      lock.unlock();
      new Stream(stub.get(), make_request(id), &stats, [&] {
        std::lock_guard<std::mutex> l(mu);
        --in_flight;
        ++finished;
        cv.notify_one();
      });
      lock.lock();
    }
    cv.wait(lock);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  lock.unlock();
  std::lock_guard<std::mutex> l(stats.mu);
  nlohmann::json out = {{"address", a.address},
                        {"concurrency", a.concurrency},
                        {"requests", a.requests},
                        {"output_len", a.output_len},
                        {"seconds", seconds},
                        {"tokens", stats.tokens},
                        {"messages", stats.messages},
                        {"tokens_per_message", stats.messages ? static_cast<double>(stats.tokens) / stats.messages : 0},
                        {"failures", stats.failures},
                        {"tokens_per_s", static_cast<double>(stats.tokens) / seconds},
                        {"inter_token_us_p50", Percentile(stats.gaps_us, 0.5)},
                        {"inter_token_us_p99", Percentile(stats.gaps_us, 0.99)}};
  std::cout << out.dump(2) << "\n";
  if (!a.log.empty()) std::ofstream(a.log, std::ios::app) << out.dump() << "\n";
  return stats.failures == 0 ? 0 : 1;
}
