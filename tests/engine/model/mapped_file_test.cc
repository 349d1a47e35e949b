// MappedFile maps a whole file read-only and reads its pages in with several
// readers at once (ranges of 64 MiB and more): every byte of a file that
// takes several ranges, an empty file and a missing one. BackgroundPageIn
// (what does the reading) makes every page of unaligned ranges resident
// (mincore on fresh anonymous memory, which starts with none), and stops
// early when destroyed.
#include "engine/util/mapped_file.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <span>

#include "engine/util/page_in.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace ernie {
namespace {

namespace fs = std::filesystem;

fs::path TempPath(const std::string& name) {
  return fs::temp_directory_path() / ("ernie_mapped_file_test_" + std::to_string(::getpid()) + "_" + name);
}

TEST(MappedFileTest, MapsEveryByteOfAFileReadInSeveralRanges) {
  // 200 MiB + 12 bytes: three readers, the last range ending mid-page.
  const size_t size = (size_t{200} << 20) + 12;
  std::vector<uint8_t> data(size);
  for (size_t i = 0; i < size; ++i) data[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  const fs::path path = TempPath("big");
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(size));
  {
    auto file = MappedFile::Open(path.string());
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_EQ(file->bytes().size(), size);
    EXPECT_TRUE(std::equal(data.begin(), data.end(), file->bytes().begin()));
    EXPECT_EQ(file->path(), path.string());
  }
  fs::remove(path);
}

TEST(MappedFileTest, EmptyAndMissingFiles) {
  const fs::path empty = TempPath("empty");
  std::ofstream(empty, std::ios::binary).flush();
  auto file = MappedFile::Open(empty.string());
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE(file->bytes().empty());
  fs::remove(empty);
  auto missing = MappedFile::Open(TempPath("missing").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_NE(missing.status().message().find("missing"), std::string::npos);
}

// Pages of [base, base + size) resident now.
size_t ResidentPages(const uint8_t* base, size_t size) {
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> flags((size + page - 1) / page);
  EXPECT_EQ(::mincore(const_cast<uint8_t*>(base), size, flags.data()), 0);
  size_t n = 0;
  for (unsigned char f : flags) n += f & 1;
  return n;
}

TEST(BackgroundPageInTest, MakesEveryPageOfUnalignedRangesResident) {
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t size = (size_t{150} << 20);  // three pieces of at most 64 MiB
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  const auto* base = static_cast<const uint8_t*>(p);
  ASSERT_EQ(ResidentPages(base, size), 0u) << "fresh anonymous memory has no pages yet";
  // Two ranges out of order, neither starting on a page; a gap left between them.
  const std::span<const uint8_t> ranges[] = {{base + (size_t{100} << 20) + 123, (size_t{50} << 20) - 123},
                                             {base + 7, (size_t{90} << 20)},
                                             {}};
  BackgroundPageIn(ranges).Wait();
  EXPECT_EQ(ResidentPages(base, (size_t{90} << 20) + page), (size_t{90} << 20) / page + 1);
  EXPECT_EQ(ResidentPages(base + (size_t{100} << 20), size_t{50} << 20), (size_t{50} << 20) / page);
  EXPECT_LT(ResidentPages(base + (size_t{91} << 20), size_t{8} << 20), (size_t{8} << 20) / page) << "the gap";
  ::munmap(p, size);
}

TEST(BackgroundPageInTest, DestroyedBeforeItIsDoneStopsAndJoins) {
  const size_t size = size_t{1} << 30;  // 16 pieces
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  const std::span<const uint8_t> whole(static_cast<const uint8_t*>(p), size);
  { BackgroundPageIn reading(std::span(&whole, 1), 2); }  // no Wait: the destructor stops the readers
  ::munmap(p, size);
}

}  // namespace
}  // namespace ernie
