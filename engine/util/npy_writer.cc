#include "engine/util/npy_writer.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ernie {

absl::Status WriteNpyFloat32(const std::string& path, std::span<const float> data, const std::vector<int64_t>& shape) {
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (numel != static_cast<int64_t>(data.size()))
    return absl::InvalidArgumentError(absl::StrCat("npy: shape holds ", numel, " values, data has ", data.size()));
  std::string dims = absl::StrJoin(shape, ", ");
  if (shape.size() == 1) dims += ",";
  std::string header = absl::StrCat("{'descr': '<f4', 'fortran_order': False, 'shape': (", dims, "), }");
  // Magic (6) + version (2) + header length (2) + header + '\n', padded to 64.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  out.write("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(header.size());
  const char len_bytes[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  out.write(len_bytes, 2);
  out << header;
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size() * sizeof(float)));
  if (!out) return absl::InternalError(absl::StrCat("write failed: ", path));
  return absl::OkStatus();
}

}  // namespace ernie
