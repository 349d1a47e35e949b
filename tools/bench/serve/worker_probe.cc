#include "tools/bench/serve/worker_probe.h"

#include <chrono>
#include <condition_variable>
#include <ctime>
#include <mutex>
#include <random>

#include <grpcpp/grpcpp.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "ernie/v1/worker.grpc.pb.h"
#include "tools/bench/serve/latency_summary.h"
#include "tools/bench/serve/request_result.h"

namespace ernie::bench {

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// One Generate stream; fills its RequestResult and reports completion.
class TimedGenerate : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  TimedGenerate(v1::Worker::Stub* stub, const v1::GenerateRequest& request, RequestResult* result,
                std::function<void()> done)
      : result_(result), done_(std::move(done)) {
    stub->async()->Generate(&context_, &request, this);
    sent_ = Clock::now();
    StartRead(&response_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    const auto now = Clock::now();
    if (response_.token_ids_size() > 0) {
      if (result_->content_chunks == 0) result_->ttft_s = Seconds(now - sent_);
      else result_->itl_s.push_back(Seconds(now - last_));
      last_ = now;
      ++result_->content_chunks;
    }
    result_->output_tokens = response_.completion_tokens();
    result_->prompt_tokens = response_.prompt_tokens();
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    result_->done = true;
    result_->latency_s = Seconds(Clock::now() - sent_);
    if (!status.ok()) result_->error = absl::StrCat("gRPC ", status.error_code(), ": ", status.error_message());
    else if (result_->content_chunks == 0) result_->error = "the stream carried no tokens";
    result_->success = result_->error.empty();
    done_();
    delete this;
  }

 private:
  grpc::ClientContext context_;
  v1::GenerateResponse response_;
  RequestResult* result_;
  std::function<void()> done_;
  Clock::time_point sent_, last_;
};

}  // namespace

std::string WorkerTtftUsage() {
  return "usage: ernie-bench worker-ttft --address HOST:PORT [--requests N] [--concurrency C]\n"
         "                               [--input-len I] [--output-len O] [--seed S] [--label TEXT]\n"
         "                               [--result-json FILE] [--result-jsonl FILE]\n"
         "Calls Worker.Generate directly (no gateway, no tokenizer) and reports TTFT, TPOT, ITL and\n"
         "end-to-end latency like `ernie-bench serve`, as the baseline of the gateway's added latency.\n";
}

absl::StatusOr<WorkerTtftOptions> ParseWorkerTtftOptions(const std::vector<std::string>& args) {
  WorkerTtftOptions o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--help" || flag == "-h") return absl::NotFoundError(WorkerTtftUsage());
    if (i + 1 >= args.size()) return absl::InvalidArgumentError(absl::StrCat(flag, ": needs a value"));
    const std::string& v = args[++i];
    auto integer = [&](int* out) -> absl::Status {
      if (!absl::SimpleAtoi(v, out) || *out < 1)
        return absl::InvalidArgumentError(absl::StrCat(flag, ": '", v, "' is not an integer >= 1"));
      return absl::OkStatus();
    };
    absl::Status s;
    if (flag == "--address") o.address = v;
    else if (flag == "--label") o.label = v;
    else if (flag == "--result-json") o.result_json = v;
    else if (flag == "--result-jsonl") o.result_jsonl = v;
    else if (flag == "--requests") s = integer(&o.requests);
    else if (flag == "--concurrency") s = integer(&o.concurrency);
    else if (flag == "--input-len") s = integer(&o.input_len);
    else if (flag == "--output-len") s = integer(&o.output_len);
    else if (flag == "--seed") {
      if (!absl::SimpleAtoi(v, &o.seed)) s = absl::InvalidArgumentError(absl::StrCat("--seed: '", v, "' is not an unsigned integer"));
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown option '", flag, "'\n", WorkerTtftUsage()));
    }
    if (!s.ok()) return s;
  }
  return o;
}

absl::StatusOr<nlohmann::json> RunWorkerTtft(const WorkerTtftOptions& o) {
  auto channel = grpc::CreateChannel(o.address, grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10)))
    return absl::UnavailableError(absl::StrCat("no worker answers at ", o.address));
  auto stub = v1::Worker::NewStub(channel);
  std::vector<RequestResult> results(static_cast<size_t>(o.requests));
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0, started = 0, finished = 0;
  auto make_request = [&](int i) {
    std::mt19937_64 rng(o.seed * 1000003u + static_cast<uint64_t>(i));
    // ERNIE's ids of the digits 0-9: the prompts `ernie-bench serve --prompt-style digits`
    // sends through the gateway, and within the instant backend's small vocabulary.
    std::uniform_int_distribution<int> token(3, 12);
    v1::GenerateRequest request;
    request.set_request_id(absl::StrCat("bench-ttft-", std::time(nullptr), "-", i));
    for (int t = 0; t < o.input_len; ++t) request.add_prompt_token_ids(token(rng));
    request.mutable_sampling()->set_max_tokens(o.output_len);
    request.mutable_sampling()->set_min_tokens(o.output_len);
    request.mutable_sampling()->set_ignore_eos(true);
    return request;
  };
  const auto start = Clock::now();
  {
    std::unique_lock<std::mutex> lock(mu);
    while (finished < o.requests) {
      while (in_flight < o.concurrency && started < o.requests) {
        ++in_flight;
        const int id = started++;
        lock.unlock();
        new TimedGenerate(stub.get(), make_request(id), &results[static_cast<size_t>(id)], [&] {
          std::lock_guard<std::mutex> l(mu);
          --in_flight;
          ++finished;
          cv.notify_one();
        });
        lock.lock();
      }
      cv.wait(lock);
    }
  }
  nlohmann::json out = SummarizeRequests(results, Seconds(Clock::now() - start));
  out["backend"] = "ernie-worker-grpc";
  out["label"] = o.label;
  out["address"] = o.address;
  out["num_prompts"] = o.requests;
  out["max_concurrency"] = o.concurrency;
  out["input_len"] = o.input_len;
  out["output_len"] = o.output_len;
  out["date"] = static_cast<int64_t>(std::time(nullptr));
  return out;
}

absl::StatusOr<nlohmann::json> QueryWorkerLoad(const std::string& address, double timeout_s) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = v1::Worker::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::duration<double>(timeout_s)));
  v1::Load load;
  const grpc::Status status = stub->GetLoad(&context, v1::GetLoadRequest(), &load);
  if (!status.ok())
    return absl::UnavailableError(absl::StrCat("GetLoad at ", address, ": gRPC ", status.error_code(), ": ", status.error_message()));
  return nlohmann::json{{"running", load.running()},
                        {"waiting", load.waiting()},
                        {"kv_blocks_used", load.kv_blocks_used()},
                        {"kv_blocks_total", load.kv_blocks_total()},
                        {"kv_blocks_free", load.kv_blocks_free()},
                        {"draining", load.draining()}};
}

}  // namespace ernie::bench
