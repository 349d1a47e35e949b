// Reads the pages of memory-mapped files in from disk ahead of their use,
// with several readers at once and in a given order. One sequential reader
// (what MAP_POPULATE is) leaves an NVMe drive most of its queue idle; a
// checkpoint's load is mostly this read, and the copy to the GPU can follow
// the readers' front instead of waiting for the whole file.
//
// Ranges are cut into pieces of at most 64 MiB (page-aligned outwards);
// readers take the next piece in order, so the pages come in roughly in
// the order given. MADV_POPULATE_READ (Linux 5.14) faults a piece in without
// touching it from user space; where the kernel lacks it, one read per page
// does the same. Nothing here can fail: a page left out is read on first use.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <thread>
#include <vector>

namespace ernie {

class BackgroundPageIn {
 public:
  // Starts up to `max_readers` threads (fewer for less than 64 MiB a reader)
  // over `ranges` in order. The memory must stay mapped until Wait returns or
  // the object is destroyed.
  explicit BackgroundPageIn(std::span<const std::span<const uint8_t>> ranges, int max_readers = 8);
  // Stops after the pieces being read and joins the readers.
  ~BackgroundPageIn();
  BackgroundPageIn(const BackgroundPageIn&) = delete;
  BackgroundPageIn& operator=(const BackgroundPageIn&) = delete;

  // Returns once every piece has been read (the calling thread reads too).
  void Wait();

 private:
  struct Piece {
    const uint8_t* begin;
    size_t size;
  };
  void ReadPieces();
  void Join();

  std::vector<Piece> pieces_;
  std::atomic<size_t> next_{0};
  std::atomic<bool> stop_{false};
  std::vector<std::thread> readers_;
};

}  // namespace ernie
