// A fixed pool of worker threads for data-parallel loops in the CPU backend.
// The calling thread takes part in every loop, so a pool of N threads runs
// N-way parallel with N-1 helpers. A decode step runs ~150 short loops, so
// helpers spin briefly between loops before sleeping: a condition-variable
// wake-up per loop would cost more than many of the loops themselves.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ernie {

class ThreadPool {
 public:
  // num_threads <= 0 means std::thread::hardware_concurrency().
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Splits [0, n) into contiguous chunks, one per thread, and runs
  // fn(begin, end) on each; returns when all chunks are done. `grain` is the
  // smallest chunk worth a thread. Not reentrant: one loop at a time, from
  // one caller thread (the engine thread).
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop(int index);

  std::vector<std::thread> workers_;  // helpers; index i runs chunk i
  std::mutex mu_;                     // guards sleeping and the wake-up
  std::condition_variable wake_cv_;   // helpers sleep here after spinning
  int sleeping_ = 0;                  // helpers blocked on wake_cv_ (guarded by mu_)
  std::atomic<uint64_t> generation_{0};  // bumped per loop; helpers watch it
  std::atomic<int> pending_{0};          // helper chunks of the current loop not yet done
  std::atomic<bool> stop_{false};
  // The current loop, published before generation_ is bumped.
  int active_chunks_ = 0;
  int64_t n_ = 0;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
};

}  // namespace ernie
