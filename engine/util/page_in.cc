#include "engine/util/page_in.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <system_error>

namespace ernie {

namespace {

constexpr size_t kPieceBytes = size_t{64} << 20;

void ReadIn(const uint8_t* begin, size_t size, size_t page) {
  if (::madvise(const_cast<uint8_t*>(begin), size, MADV_POPULATE_READ) == 0) return;
  uint8_t sink = 0;
  for (size_t at = 0; at < size; at += page) sink ^= *static_cast<const volatile uint8_t*>(begin + at);
  (void)sink;
}

}  // namespace

BackgroundPageIn::BackgroundPageIn(std::span<const std::span<const uint8_t>> ranges, int max_readers) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  size_t total = 0;
  for (const std::span<const uint8_t> range : ranges) {
    if (range.empty()) continue;
    // Whole pages (madvise needs an aligned start); a page shared with the
    // range before is read twice at worst, which costs nothing from the cache.
    const uintptr_t first = reinterpret_cast<uintptr_t>(range.data()) / page * page;
    const uintptr_t last = (reinterpret_cast<uintptr_t>(range.data()) + range.size() + page - 1) / page * page;
    for (uintptr_t at = first; at < last; at += kPieceBytes) {
      const size_t size = std::min<uintptr_t>(kPieceBytes, last - at);
      pieces_.push_back({reinterpret_cast<const uint8_t*>(at), size});
      total += size;
    }
  }
  const auto readers =
      static_cast<int>(std::clamp<size_t>(total / kPieceBytes, 1, static_cast<size_t>(std::max(1, max_readers))));
  for (int i = 0; i < readers && !pieces_.empty(); ++i) {
    try {
      readers_.emplace_back([this] { ReadPieces(); });
    } catch (const std::system_error&) {
      break;  // no thread to be had: Wait's caller, or the first use, reads the rest
    }
  }
}

BackgroundPageIn::~BackgroundPageIn() {
  stop_.store(true, std::memory_order_relaxed);
  Join();
}

void BackgroundPageIn::Wait() {
  ReadPieces();
  Join();
}

void BackgroundPageIn::ReadPieces() {
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  while (!stop_.load(std::memory_order_relaxed)) {
    const size_t i = next_.fetch_add(1, std::memory_order_relaxed);
    if (i >= pieces_.size()) return;
    ReadIn(pieces_[i].begin, pieces_[i].size, page);
  }
}

void BackgroundPageIn::Join() {
  for (std::thread& t : readers_)
    if (t.joinable()) t.join();
  readers_.clear();
}

}  // namespace ernie
