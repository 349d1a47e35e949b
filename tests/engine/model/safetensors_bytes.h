// Builds safetensors files byte by byte for tests, including broken ones.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ernie::testing {

// 8-byte little-endian length, then `header`, then `data`.
inline std::vector<uint8_t> SafetensorsBytes(const std::string& header, const std::vector<uint8_t>& data,
                                             uint64_t declared_len = UINT64_MAX) {
  const uint64_t len = declared_len == UINT64_MAX ? header.size() : declared_len;
  std::vector<uint8_t> out;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(len >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

}  // namespace ernie::testing
