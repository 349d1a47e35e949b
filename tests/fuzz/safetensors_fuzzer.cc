// Fuzz target: the safetensors parser (engine/model/safetensors.h), which
// must be a pure function of the bytes that never crashes.
//
// Input: 3 bytes giving a count Z (little-endian, below 2 MiB), then the
// start of a file. The parser sees the file as given and once more followed
// by Z zero bytes: a real header (the seeds are the headers of
// tests/data's checkpoints) then reaches its tensors, which a seed of the
// header alone could not, without committing megabytes of weights.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "engine/model/safetensors.h"
#include "fuzz_check.h"

namespace {

void CheckContents(std::span<const uint8_t> file) {
  auto contents = ernie::ParseSafetensors(file, "fuzz.safetensors");
  if (!contents.ok()) {
    ERNIE_FUZZ_CHECK(!contents.status().message().empty(), "an error says why");
    return;
  }
  // Every view lies inside the file and holds exactly its shape's bytes.
  for (const auto& [name, view] : contents->tensors) {
    ERNIE_FUZZ_CHECK(view.bytes.size() == static_cast<size_t>(view.numel()) * ernie::DTypeSize(view.dtype),
                     "view size matches shape and dtype");
    if (!view.bytes.empty()) {
      ERNIE_FUZZ_CHECK(view.bytes.data() >= file.data() &&
                           view.bytes.data() + view.bytes.size() <= file.data() + file.size(),
                       "view inside the file");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const size_t zeros = (static_cast<size_t>(data[0]) | static_cast<size_t>(data[1]) << 8 |
                        static_cast<size_t>(data[2]) << 16) & ((1u << 21) - 1);
  const std::span<const uint8_t> prefix(data + 3, size - 3);
  CheckContents(prefix);
  // The file sits at the very end of one allocation, so AddressSanitizer
  // sees a read past its end; one buffer for every run keeps big files fast.
  constexpr size_t kArenaBytes = 4u << 20;
  static uint8_t* const arena = new uint8_t[kArenaBytes];
  const size_t file_size = prefix.size() + zeros;
  if (file_size > kArenaBytes) return 0;
  uint8_t* const file = arena + (kArenaBytes - file_size);
  std::copy(prefix.begin(), prefix.end(), file);
  std::fill(file + prefix.size(), file + file_size, uint8_t{0});
  CheckContents(std::span<const uint8_t>(file, file_size));
  return 0;
}
