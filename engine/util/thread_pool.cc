#include "engine/util/thread_pool.h"

#include <algorithm>

namespace ernie {

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

static void ChunkBounds(int64_t n, int chunks, int index, int64_t* begin, int64_t* end) {
  const int64_t base = n / chunks, extra = n % chunks;
  *begin = index * base + std::min<int64_t>(index, extra);
  *end = *begin + base + (index < extra ? 1 : 0);
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int chunks = static_cast<int>(std::min<int64_t>(num_threads(), (n + grain - 1) / grain));
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    n_ = n;
    fn_ = &fn;
    active_chunks_ = chunks;
    pending_ = chunks - 1;
    ++generation_;
  }
  start_cv_.notify_all();
  int64_t begin, end;
  ChunkBounds(n, chunks, 0, &begin, &end);
  fn(begin, end);
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return pending_ == 0; });
  fn_ = nullptr;
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  while (true) {
    std::unique_lock<std::mutex> lock(mu_);
    start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (index >= active_chunks_) continue;  // this loop needs fewer threads
    const auto* fn = fn_;
    int64_t begin, end;
    ChunkBounds(n_, active_chunks_, index, &begin, &end);
    lock.unlock();
    (*fn)(begin, end);
    lock.lock();
    if (--pending_ == 0) done_cv_.notify_one();
  }
}

}  // namespace ernie
