// SHA-256 (FIPS 180-4), for identifying vocabularies across processes.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace ernie::tokenizer {

class Sha256 {
 public:
  Sha256();
  void Update(std::string_view data);
  std::array<uint8_t, 32> Finish();  // the object is spent afterwards

 private:
  void ProcessBlock(const uint8_t* block);

  std::array<uint32_t, 8> state_;  // the running hash H0..H7
  std::array<uint8_t, 64> block_;  // bytes not yet processed
  size_t block_size_ = 0;          // how many of block_ are filled
  uint64_t total_bytes_ = 0;       // message length so far
};

std::string HexString(const uint8_t* data, size_t size);

}  // namespace ernie::tokenizer
