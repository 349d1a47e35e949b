#include "engine/util/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ernie {

namespace {

// Reads a mapping's pages in from disk with several readers at once: one
// sequential reader (what MAP_POPULATE is) leaves an NVMe drive most of its
// queue idle, and a checkpoint's load is mostly this read. Ranges of at
// least 64 MiB, at most 8 threads. MADV_POPULATE_READ (Linux 5.14) faults a
// range in without touching it from user space; where the kernel lacks it,
// one read per page does the same. Nothing here can fail the open: a page
// left out is read on first use instead.
void PopulateInParallel(const uint8_t* data, size_t size) {
  constexpr size_t kMinRange = size_t{64} << 20;
  constexpr size_t kMaxThreads = 8;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t threads = std::clamp<size_t>(size / kMinRange, 1, kMaxThreads);
  // Ranges start on page boundaries (madvise needs it); the last takes the rest.
  const size_t range = (size / threads + page - 1) / page * page;
  auto populate = [data, size, page](size_t begin, size_t end) {
    if (begin >= end) return;
    void* start = const_cast<uint8_t*>(data + begin);
    if (::madvise(start, end - begin, MADV_POPULATE_READ) == 0) return;
    uint8_t sink = 0;
    for (size_t at = begin; at < end; at += page) sink ^= *static_cast<const volatile uint8_t*>(data + at);
    (void)sink;
    (void)size;
  };
  std::vector<std::thread> readers;
  for (size_t i = 1; i < threads; ++i) {
    const size_t begin = i * range, end = std::min(size, (i + 1) * range);
    try {
      readers.emplace_back(populate, begin, end);
    } catch (const std::system_error&) {  // no thread to be had: this one reads the range
      populate(begin, end);
    }
  }
  populate(0, std::min(size, range));
  for (std::thread& t : readers) t.join();
}

}  // namespace

absl::StatusOr<MappedFile> MappedFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    std::string msg = absl::StrCat("cannot open ", path, ": ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(msg);
    if (err == EACCES) return absl::PermissionDeniedError(msg);
    return absl::InternalError(msg);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  }
  MappedFile file;
  file.path_ = path;
  file.size_ = static_cast<size_t>(st.st_size);
  if (file.size_ > 0) {
    void* p = ::mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat("cannot map ", path, ": ", std::strerror(err)));
    }
    file.data_ = static_cast<const uint8_t*>(p);
    // Every page faulted in now, so the first requests do not pay for it.
    PopulateInParallel(file.data_, file.size_);
  }
  ::close(fd);  // the mapping stays valid without the descriptor
  return file;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      path_(std::move(other.path_)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    path_ = std::move(other.path_);
  }
  return *this;
}

MappedFile::~MappedFile() { Reset(); }

void MappedFile::Reset() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace ernie
