#include "gateway/upstream/worker_pool.h"

#include <netdb.h>
#include <sys/socket.h>
#include <arpa/inet.h>

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "services/common/grpc_handoff.h"

namespace ernie::gateway {
namespace {

// "host:port" -> every "ip:port" the host resolves to (IPv4 and IPv6).
std::set<std::string> ResolveAll(const std::string& host_port) {
  std::set<std::string> out;
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) return out;
  const std::string host = host_port.substr(0, colon);
  const std::string port = host_port.substr(colon + 1);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  if (getaddrinfo(host.c_str(), port.c_str(), &hints, &result) != 0) return out;
  for (addrinfo* it = result; it != nullptr; it = it->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    if (it->ai_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(it->ai_addr)->sin_addr, text, sizeof(text));
      out.insert(absl::StrCat(text, ":", port));
    } else if (it->ai_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(it->ai_addr)->sin6_addr, text, sizeof(text));
      out.insert(absl::StrCat("[", text, "]:", port));
    }
  }
  freeaddrinfo(result);
  return out;
}

}  // namespace

WorkerPool::WorkerPool(WorkerPoolOptions options) : options_(std::move(options)) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::string& address : options_.addresses) AddWorkerLocked(address);
}

WorkerPool::~WorkerPool() { Stop(); }

std::shared_ptr<WorkerPool::Worker> WorkerPool::AddWorkerLocked(const std::string& address) {
  auto endpoint = std::make_shared<WorkerEndpoint>();
  endpoint->address = address;
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, 64 << 20);
  // A restarted server is back within seconds: reconnect soon, not after gRPC's default 2-minute backoff.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  // Workers found by DNS are dialled by IP: their certificate names the Service instead.
  if (!options_.tls_server_name.empty()) args.SetSslTargetNameOverride(options_.tls_server_name);
  endpoint->channel = grpc::CreateCustomChannel(
      address, options_.credentials ? options_.credentials : grpc::InsecureChannelCredentials(), args);
  endpoint->stub = ernie::v1::Worker::NewStub(endpoint->channel);
  if (options_.multiplexed_streams > 0)
    endpoint->multiplexed = std::make_unique<MultiplexedWorker>(endpoint->stub.get(), options_.multiplexed_streams);
  auto worker = std::make_shared<Worker>();
  worker->id = next_worker_id_++;
  worker->endpoint = std::move(endpoint);
  workers_.push_back(worker);
  return worker;
}

void WorkerPool::Start() {
  if (poller_.joinable()) return;
  poller_ = std::thread([this] { PollLoop(); });
}

void WorkerPool::Stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (poller_.joinable()) poller_.join();
  // Outstanding polls call back into this object: wait for them (each ends
  // within poll_timeout).
  std::unique_lock<std::mutex> lock(mutex_);
  polled_.wait(lock, [this] { return outstanding_polls_ == 0; });
}

bool WorkerPool::WaitForLeasesReleased(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  return polled_.wait_for(lock, timeout, [this] { return leases_out_ == 0; });
}

void WorkerPool::PollLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    if (!options_.dns_name.empty() && std::chrono::steady_clock::now() >= next_dns_) {
      ResolveDns();
      next_dns_ = std::chrono::steady_clock::now() + options_.dns_interval;
    }
    PollAll();
    lock.lock();
    wake_.wait_for(lock, options_.poll_interval, [this] { return stopping_; });
  }
}

void WorkerPool::ResolveDns() {
  const std::set<std::string> resolved = ResolveAll(options_.dns_name);
  if (resolved.empty()) return;  // a DNS hiccup keeps the last known set
  std::lock_guard<std::mutex> lock(mutex_);
  std::set<std::string> present;
  std::erase_if(workers_, [&](const std::shared_ptr<Worker>& worker) {
    const bool keep = resolved.count(worker->endpoint->address) > 0 ||
                      std::find(options_.addresses.begin(), options_.addresses.end(), worker->endpoint->address) !=
                          options_.addresses.end();
    if (keep) present.insert(worker->endpoint->address);
    return !keep;
  });
  for (const std::string& address : resolved) {
    if (present.count(address) == 0) AddWorkerLocked(address);
  }
}

void WorkerPool::PollAll() {
  std::vector<std::shared_ptr<Worker>> workers;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    workers = workers_;
  }
  for (const auto& worker : workers) Poll(worker);
}

void WorkerPool::Poll(const std::shared_ptr<Worker>& worker) {
  struct LoadCall {
    grpc::ClientContext context;
    ernie::v1::GetLoadRequest request;
    ernie::v1::Load response;
  };
  struct InfoCall {
    grpc::ClientContext context;
    ernie::v1::GetModelInfoRequest request;
    ernie::v1::ModelInfo response;
  };
  bool need_info = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (worker->poll_pending || stopping_) return;
    worker->poll_pending = true;
    need_info = !worker->info && !worker->info_pending;
    if (need_info) worker->info_pending = true;
    outstanding_polls_ += need_info ? 2 : 1;
  }
  const auto deadline = std::chrono::system_clock::now() + options_.poll_timeout;
  auto call = std::make_shared<LoadCall>();
  call->context.set_deadline(deadline);
  HandToGrpc(call.get());
  worker->endpoint->stub->async()->GetLoad(
      &call->context, &call->request, &call->response, [this, worker, call](grpc::Status status) {
        TakeFromGrpc(call.get());
        OnLoadPolled(*worker, status, call->response);
      });
  if (!need_info) return;
  auto info = std::make_shared<InfoCall>();
  info->context.set_deadline(deadline);
  HandToGrpc(info.get());
  worker->endpoint->stub->async()->GetModelInfo(
      &info->context, &info->request, &info->response, [this, worker, info](grpc::Status status) {
        TakeFromGrpc(info.get());
        OnInfoFetched(*worker, status, info->response);
      });
}

void WorkerPool::OnLoadPolled(Worker& worker, const grpc::Status& status, const ernie::v1::Load& load) {
  std::lock_guard<std::mutex> lock(mutex_);
  worker.poll_pending = false;
  // A worker counts as healthy once its ModelInfo is known and it is not draining.
  worker.healthy = status.ok() && !load.draining() && worker.info.has_value();
  if (status.ok()) worker.load = load;
  --outstanding_polls_;
  polled_.notify_all();  // under the lock: Stop() may destroy this object right after
}

void WorkerPool::OnInfoFetched(Worker& worker, const grpc::Status& status, const ernie::v1::ModelInfo& info) {
  std::lock_guard<std::mutex> lock(mutex_);
  worker.info_pending = false;
  if (status.ok()) {
    worker.info = info;
    if (!model_info_) model_info_ = info;
  }
  --outstanding_polls_;
  polled_.notify_all();
}

void WorkerPool::PollNowForTest() {
  // Two rounds: the first may fetch ModelInfo, which health depends on.
  for (int round = 0; round < 2; ++round) {
    PollAll();
    std::unique_lock<std::mutex> lock(mutex_);
    polled_.wait_for(lock, options_.poll_timeout + std::chrono::milliseconds(500), [this] {
      return std::none_of(workers_.begin(), workers_.end(),
                          [](const auto& w) { return w->poll_pending || w->info_pending; });
    });
  }
}

std::optional<WorkerPool::Lease> WorkerPool::Acquire(uint64_t affinity_key, const std::vector<std::string>& excluded) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<WorkerLoadView> views;
  std::vector<size_t> excluded_indices;
  std::optional<size_t> affinity;
  const std::optional<uint32_t> affine = affinity_.Find(affinity_key);
  for (size_t i = 0; i < workers_.size(); ++i) {
    const Worker& worker = *workers_[i];
    views.push_back(WorkerLoadView{.healthy = worker.healthy,
                                   .running = worker.load.running(),
                                   .waiting = worker.load.waiting(),
                                   .in_flight = worker.in_flight,
                                   .kv_blocks_used = worker.load.kv_blocks_used(),
                                   .kv_blocks_total = worker.load.kv_blocks_total()});
    if (std::find(excluded.begin(), excluded.end(), worker.endpoint->address) != excluded.end()) {
      excluded_indices.push_back(i);
    }
    if (affine == worker.id) affinity = i;
  }
  const std::optional<size_t> chosen = ChooseWorker(views, excluded_indices, affinity, options_.choice);
  if (!chosen) return std::nullopt;
  ++workers_[*chosen]->in_flight;
  ++leases_out_;
  return Lease{workers_[*chosen]->endpoint};
}

void WorkerPool::Release(const Lease& lease, bool failed, std::optional<uint64_t> served_prefix) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& worker : workers_) {
    if (worker->endpoint != lease.endpoint) continue;
    worker->in_flight = std::max(0, worker->in_flight - 1);
    if (failed) worker->healthy = false;
    if (served_prefix && !failed) affinity_.Record(*served_prefix, worker->id);
  }
  --leases_out_;
  polled_.notify_all();  // under the lock: the waiter may destroy this object right after
}

bool WorkerPool::AnyHealthy() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::any_of(workers_.begin(), workers_.end(), [](const auto& w) { return w->healthy; });
}

std::optional<ernie::v1::ModelInfo> WorkerPool::model_info() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return model_info_;
}

std::vector<WorkerStatus> WorkerPool::Statuses() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<WorkerStatus> out;
  for (const auto& worker : workers_) {
    out.push_back(WorkerStatus{.address = worker->endpoint->address,
                               .healthy = worker->healthy,
                               .load = worker->load,
                               .in_flight = worker->in_flight});
  }
  return out;
}

}  // namespace ernie::gateway
