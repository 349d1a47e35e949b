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

  // Splits [0, n) into contiguous pieces (a few per thread, each at least
  // `grain` long unless n is smaller) and runs fn(begin, end) on each; the
  // threads claim pieces as they go, so a thread the OS descheduled on a busy
  // machine holds up at most its current piece. Returns when every piece is
  // done. Not reentrant: one loop at a time, from one caller thread (the
  // engine thread).
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop();
  // Claims and runs pieces of the loop of generation `gen` until none is left.
  void RunPieces(uint32_t gen, int64_t n, int pieces, const std::function<void(int64_t, int64_t)>& fn);

  std::vector<std::thread> workers_;  // helpers
  std::mutex mu_;                     // guards sleeping, the wake-up and the loop's published values
  std::condition_variable wake_cv_;   // helpers sleep here after spinning
  int sleeping_ = 0;                  // helpers blocked on wake_cv_ (guarded by mu_)
  std::atomic<uint64_t> generation_{0};  // bumped per loop; helpers watch it
  // (low 32 bits of the loop's generation) << 32 | next unclaimed piece: a
  // helper still holding an earlier loop's values can never claim a piece
  // of this one.
  std::atomic<uint64_t> claim_{0};
  std::atomic<int> pieces_done_{0};      // pieces of the current loop finished
  std::atomic<bool> stop_{false};
  // The current loop, published under mu_ before generation_ is bumped.
  int pieces_ = 0;
  int64_t n_ = 0;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
};

}  // namespace ernie
