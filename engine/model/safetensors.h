// The safetensors format, parsed from bytes: an 8-byte little-endian header
// length N, N bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]},
// "__metadata__": {...}}, then the data. The parser is a pure function of the
// bytes (no I/O, never crashes on any input: a fuzz target drives it), so
// every malformed file gives an error naming the file and the tensor.
#pragma once

#include <map>
#include <span>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "engine/model/tensor_view.h"

namespace ernie {

struct SafetensorsContents {
  std::map<std::string, TensorView> tensors;      // by name; views into the parsed bytes
  std::map<std::string, std::string> metadata;    // "__metadata__" string entries
};

// Parses `bytes` (the whole file). `file_name` only labels error messages.
// Errors (InvalidArgument): file shorter than 8 bytes, header length beyond
// the file, header not JSON or not an object, a tensor entry missing dtype /
// shape / data_offsets, an unknown dtype, negative dimensions, offsets out of
// the data area, reversed or overlapping, shape and byte size disagreeing.
absl::StatusOr<SafetensorsContents> ParseSafetensors(std::span<const uint8_t> bytes,
                                                     absl::string_view file_name);

}  // namespace ernie
