// MappedFile maps a whole file read-only and reads its pages in with several
// readers at once (ranges of 64 MiB and more): every byte of a file that
// takes several ranges, an empty file and a missing one.
#include "engine/util/mapped_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

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

}  // namespace
}  // namespace ernie
