#include "engine/util/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#define ERNIE_PAUSE() _mm_pause()
#else
#define ERNIE_PAUSE() std::this_thread::yield()
#endif

namespace ernie {

namespace {

// How long a helper spins for the next loop before it sleeps (~50-100 us).
constexpr int kSpinIterations = 20000;
// How long the caller spins for helpers before yielding its core.
constexpr int kCallerSpinIterations = 4000;
// Pieces per thread in a loop: enough that a stalled thread's share is
// picked up by the others, few enough that each piece streams a long run.
constexpr int kPiecesPerThread = 4;

void ChunkBounds(int64_t n, int chunks, int index, int64_t* begin, int64_t* end) {
  const int64_t base = n / chunks, extra = n % chunks;
  *begin = index * base + std::min<int64_t>(index, extra);
  *end = *begin + base + (index < extra ? 1 : 0);
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  for (int i = 1; i < num_threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  wake_cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::RunPieces(uint32_t gen, int64_t n, int pieces, const std::function<void(int64_t, int64_t)>& fn) {
  uint64_t claim = claim_.load(std::memory_order_acquire);
  while (static_cast<uint32_t>(claim >> 32) == gen && static_cast<int64_t>(claim & 0xffffffffu) < pieces) {
    if (!claim_.compare_exchange_weak(claim, claim + 1, std::memory_order_acq_rel)) continue;  // claim reloaded
    int64_t begin, end;
    ChunkBounds(n, pieces, static_cast<int>(claim & 0xffffffffu), &begin, &end);
    fn(begin, end);
    pieces_done_.fetch_add(1, std::memory_order_acq_rel);
    claim = claim_.load(std::memory_order_acquire);
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int pieces = static_cast<int>(std::min<int64_t>(int64_t{num_threads()} * kPiecesPerThread, (n + grain - 1) / grain));
  if (pieces <= 1 || num_threads() == 1) {
    fn(0, n);
    return;
  }
  uint32_t gen;
  {
    // Published under the mutex, so a helper reads one loop's values together
    // with that loop's generation, never a mix of two loops.
    std::lock_guard<std::mutex> lock(mu_);
    n_ = n;
    fn_ = &fn;
    pieces_ = pieces;
    pieces_done_.store(0, std::memory_order_relaxed);
    gen = static_cast<uint32_t>(generation_.load(std::memory_order_relaxed) + 1);
    claim_.store(uint64_t{gen} << 32, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_release);
    if (sleeping_ > 0) wake_cv_.notify_all();
  }
  RunPieces(gen, n, pieces, fn);
  // Pieces helpers claimed finish within microseconds on an idle machine; on a
  // busy one a helper may be descheduled, so stop burning the core after a short spin.
  for (int spin = 0; pieces_done_.load(std::memory_order_acquire) != pieces; ++spin) {
    if (spin < kCallerSpinIterations) ERNIE_PAUSE();
    else std::this_thread::yield();
  }
}

void ThreadPool::WorkerLoop() {
  uint64_t seen = 0;
  while (true) {
    // Spin for the next loop, then sleep until one is published.
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < kSpinIterations && !stop_.load(std::memory_order_relaxed); ++spin) {
      if (spin % 1024 == 1023) std::this_thread::yield();  // let a busy machine's other work in
      else ERNIE_PAUSE();
      gen = generation_.load(std::memory_order_acquire);
    }
    int pieces;
    int64_t n;
    const std::function<void(int64_t, int64_t)>* fn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (gen == seen) {
        ++sleeping_;
        wake_cv_.wait(lock, [&] { return stop_.load() || generation_.load(std::memory_order_acquire) != seen; });
        --sleeping_;
      }
      if (stop_.load()) return;
      seen = generation_.load(std::memory_order_acquire);
      pieces = pieces_;
      n = n_;
      fn = fn_;
    }
    RunPieces(static_cast<uint32_t>(seen), n, pieces, *fn);
  }
}

}  // namespace ernie
