// A streaming writer for the safetensors format
// (https://huggingface.co/docs/safetensors): an 8-byte little-endian header
// length, a JSON header, then the raw tensor bytes.
//
// The writer never holds a tensor: it asks the caller for each tensor's bytes
// in chunks, in file order, so a checkpoint of any size is written with a
// few megabytes of memory. The file matches what Hugging Face's writer
// produces: header entries sorted by name (data laid out in that same
// order), "__metadata__" first, header padded with spaces to a multiple of 8
// so every tensor starts 8-byte aligned.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ernie::model {

// One tensor of a file to write.
struct SafetensorsTensorSpec {
  std::string name;            // unique, non-empty
  std::string dtype;           // "BF16", "F16", "F32" or "I32"
  std::vector<int64_t> shape;  // every dimension >= 0; {} is a scalar
};

// Bytes of one element of `dtype` ("BF16" -> 2), or InvalidArgument.
absl::StatusOr<size_t> SafetensorsDtypeSize(const std::string& dtype);

// Bytes of the tensor's data (numel * element size), or InvalidArgument.
absl::StatusOr<uint64_t> SafetensorsTensorBytes(const SafetensorsTensorSpec& spec);

// Produces the bytes of tensor `spec_index` (an index into the `specs` given
// to WriteSafetensors) from `byte_offset` on, exactly `chunk.size()` of them.
// Chunks of one tensor arrive in order, starting at offset 0 and each
// beginning at a multiple of 8 bytes; tensors arrive one after another in
// file (name) order. A non-OK status aborts the write.
using SafetensorsChunkFiller = std::function<absl::Status(
    size_t spec_index, uint64_t byte_offset, std::span<uint8_t> chunk)>;

struct SafetensorsWriteOptions {
  // String pairs for "__metadata__"; Hugging Face writes {"format": "pt"}.
  std::map<std::string, std::string> metadata = {{"format", "pt"}};
  // Largest chunk handed to the filler (rounded down to a multiple of 8).
  size_t chunk_bytes = size_t{8} << 20;
};

// Builds the header bytes (length prefix excluded, padding included) that
// WriteSafetensors writes for `specs`. Exposed for tests and size planning.
absl::StatusOr<std::string> BuildSafetensorsHeader(
    std::span<const SafetensorsTensorSpec> specs,
    const std::map<std::string, std::string>& metadata);

// Where everything of the file WriteSafetensors writes for `specs` lies: a
// writer that fills tensors out of order (ernie-quantize's output, written
// as each layer is done) writes the same bytes with pwrite at these offsets.
struct SafetensorsLayout {
  std::string header;                  // as BuildSafetensorsHeader
  std::vector<uint64_t> file_offsets;  // [specs.size()]: where each tensor's data starts in the file
  std::vector<uint64_t> bytes;         // [specs.size()]: its data's size
  uint64_t file_bytes = 0;             // the whole file: 8 + header + data

  // The file's first 8 + header.size() bytes: the header's length
  // (little-endian) and the header.
  std::string FileHead() const;
};
absl::StatusOr<SafetensorsLayout> PlanSafetensors(std::span<const SafetensorsTensorSpec> specs,
                                                  const std::map<std::string, std::string>& metadata);

// Writes `path` (through `path`.tmp, renamed at the end, so a failed write
// never leaves a truncated file under the real name). Errors: InvalidArgument
// for bad specs (duplicate or empty names, unknown dtype, negative dims),
// Internal/PermissionDenied-like errors naming the path for I/O failures,
// or the filler's own status.
absl::Status WriteSafetensors(const std::string& path,
                              std::span<const SafetensorsTensorSpec> specs,
                              const SafetensorsChunkFiller& fill,
                              const SafetensorsWriteOptions& options = {});

}  // namespace ernie::model
