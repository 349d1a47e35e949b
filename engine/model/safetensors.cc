#include "engine/model/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace ernie {

std::string ShapeToString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

namespace {

// Headers above this are refused before parsing (the format's own limit is 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

absl::Status Malformed(absl::string_view file, absl::string_view tensor, absl::string_view why) {
  if (tensor.empty()) return absl::InvalidArgumentError(absl::StrCat(file, ": ", why));
  return absl::InvalidArgumentError(absl::StrCat(file, ": tensor '", tensor, "': ", why));
}

// Reads a non-negative integer that fits in int64 from a JSON value.
bool ReadIndex(const nlohmann::json& v, int64_t* out) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    *out = static_cast<int64_t>(u);
    return true;
  }
  if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    if (i < 0) return false;
    *out = i;
    return true;
  }
  return false;
}

struct Extent {
  int64_t begin, end;
  std::string name;
};

absl::StatusOr<TensorView> ParseEntry(const std::string& name, const nlohmann::json& entry,
                                      std::span<const uint8_t> data, absl::string_view file) {
  if (!entry.is_object()) return Malformed(file, name, "entry is not an object");
  auto dtype_it = entry.find("dtype");
  auto shape_it = entry.find("shape");
  auto offsets_it = entry.find("data_offsets");
  if (dtype_it == entry.end() || !dtype_it->is_string()) return Malformed(file, name, "missing string 'dtype'");
  if (shape_it == entry.end() || !shape_it->is_array()) return Malformed(file, name, "missing array 'shape'");
  if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2)
    return Malformed(file, name, "'data_offsets' must be [begin, end]");

  TensorView view;
  view.name = name;
  view.file = std::string(file);
  const std::string dtype_name = dtype_it->get<std::string>();
  auto dtype = DTypeFromSafetensorsName(dtype_name);
  if (!dtype) return Malformed(file, name, absl::StrCat("unsupported dtype '", dtype_name, "' (F32, F16, BF16 and I32 are read)"));
  view.dtype = *dtype;

  // Element count with overflow checks: a hostile header must not wrap around.
  int64_t numel = 1;
  for (const auto& d : *shape_it) {
    int64_t dim;
    if (!ReadIndex(d, &dim)) return Malformed(file, name, "shape dimensions must be non-negative integers");
    if (dim != 0 && numel > std::numeric_limits<int64_t>::max() / 8 / dim)
      return Malformed(file, name, "shape is too large");
    numel *= dim;
    view.shape.push_back(dim);
  }
  int64_t begin, end;
  if (!ReadIndex((*offsets_it)[0], &begin) || !ReadIndex((*offsets_it)[1], &end))
    return Malformed(file, name, "data_offsets must be non-negative integers");
  if (end < begin) return Malformed(file, name, absl::StrCat("data_offsets reversed [", begin, ", ", end, "]"));
  if (static_cast<uint64_t>(end) > data.size())
    return Malformed(file, name, absl::StrCat("data_offsets [", begin, ", ", end, "] beyond the data area of ",
                                              data.size(), " bytes"));
  const int64_t expected = numel * static_cast<int64_t>(DTypeSize(view.dtype));
  if (end - begin != expected)
    return Malformed(file, name, absl::StrCat("shape ", ShapeToString(view.shape), " of ", dtype_name, " needs ",
                                              expected, " bytes but data_offsets span ", end - begin));
  view.bytes = data.subspan(static_cast<size_t>(begin), static_cast<size_t>(end - begin));
  return view;
}

}  // namespace

absl::StatusOr<SafetensorsContents> ParseSafetensors(std::span<const uint8_t> bytes, absl::string_view file) {
  if (bytes.size() < 8) return Malformed(file, "", "file is shorter than the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[static_cast<size_t>(i)];
  if (header_len > bytes.size() - 8)
    return Malformed(file, "", absl::StrCat("header length ", header_len, " goes beyond the file (", bytes.size(), " bytes)"));
  if (header_len > kMaxHeaderBytes) return Malformed(file, "", "header is larger than 100 MB");

  const char* header_begin = reinterpret_cast<const char*>(bytes.data() + 8);
  nlohmann::json header = nlohmann::json::parse(header_begin, header_begin + header_len, nullptr,
                                                /*allow_exceptions=*/false);
  if (header.is_discarded()) return Malformed(file, "", "header is not valid JSON");
  if (!header.is_object()) return Malformed(file, "", "header is not a JSON object");

  const std::span<const uint8_t> data = bytes.subspan(8 + header_len);
  SafetensorsContents out;
  std::vector<Extent> extents;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return Malformed(file, "", "__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m)
        if (m->is_string()) out.metadata[m.key()] = m->get<std::string>();
      continue;
    }
    auto view = ParseEntry(it.key(), *it, data, file);
    if (!view.ok()) return view.status();
    const auto* begin = view->bytes.data();
    const int64_t offset = view->bytes.empty() ? 0 : begin - data.data();
    if (!view->bytes.empty()) extents.push_back({offset, offset + static_cast<int64_t>(view->bytes.size()), it.key()});
    out.tensors.emplace(it.key(), std::move(*view));
  }
  std::sort(extents.begin(), extents.end(), [](const Extent& a, const Extent& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < extents.size(); ++i) {
    if (extents[i].begin < extents[i - 1].end)
      return Malformed(file, extents[i].name, absl::StrCat("data overlaps tensor '", extents[i - 1].name, "'"));
  }
  return out;
}

}  // namespace ernie
