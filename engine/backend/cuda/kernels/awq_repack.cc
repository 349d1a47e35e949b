#include "engine/backend/cuda/kernels/awq_repack.h"

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/kernels/awq_gemm.h"

namespace ernie::cuda {

namespace {

// Nibble of column n in a row of AutoAWQ words (inverse of kAwqOrder).
uint32_t AwqNibble(const int32_t* row_words, int64_t n) {
  constexpr int kNibbleOfColumn[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  const auto word = static_cast<uint32_t>(row_words[n / 8]);
  return (word >> (4 * kNibbleOfColumn[n % 8])) & 0xFu;
}

absl::Status CheckShapes(const AwqRawLinear& raw) {
  const int64_t k = raw.k, n = raw.n, g = raw.group_size;
  if (n < 8 || n % 8 != 0)
    return absl::InvalidArgumentError(absl::StrCat("AWQ n=", n, " is not a positive multiple of 8"));
  if (g < 32 || (g & (g - 1)) != 0)
    return absl::InvalidArgumentError(absl::StrCat("AWQ group_size=", g, " is not a power of two >= 32"));
  if (k < 64 || k % 64 != 0 || k % g != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("AWQ k=", k, " is not a positive multiple of 64 and of group_size ", g));
  const auto expect = [](const char* what, size_t got, int64_t want) {
    return got == static_cast<size_t>(want)
               ? absl::OkStatus()
               : absl::InvalidArgumentError(absl::StrCat("AWQ ", what, " has ", got, " elements, expected ", want));
  };
  if (auto s = expect("qweight [k, n/8]", raw.qweight.size(), k * n / 8); !s.ok()) return s;
  if (auto s = expect("qzeros [k/group, n/8]", raw.qzeros.size(), k / g * n / 8); !s.ok()) return s;
  return expect("scales [k/group, n]", raw.scales.size(), k / g * n);
}

}  // namespace

absl::StatusOr<AwqPackedLinear> RepackAwqLinear(const AwqRawLinear& raw) {
  if (auto s = CheckShapes(raw); !s.ok()) return s;
  const int64_t k = raw.k, n = raw.n, g = raw.group_size, tiles = (n + 15) / 16, blocks = k / 64, groups = k / g;
  AwqPackedLinear out{.packed = std::vector<uint32_t>(static_cast<size_t>(AwqPackedWords(n, k))),
                      .records = std::vector<uint32_t>(static_cast<size_t>(AwqRecordWords(n, k, g))),
                      .k = raw.k,
                      .n = raw.n,
                      .group_size = raw.group_size};
  // packed[tile][block][lane = 4 gi + c][j]: row 16 tile + gi + 8 (j % 2), half j / 2;
  // nibble at bits 4p + 16i <- k = 64 block + 32 half + 8c + 2p + i.
  size_t at = 0;
  for (int64_t tile = 0; tile < tiles; ++tile)
    for (int64_t block = 0; block < blocks; ++block)
      for (int lane = 0; lane < 32; ++lane)
        for (int j = 0; j < 4; ++j, ++at) {
          const int64_t row = tile * 16 + lane / 4 + 8 * (j % 2);
          if (row >= n) continue;  // padding rows stay 0
          uint32_t word = 0;
          for (int p = 0; p < 4; ++p)
            for (int i = 0; i < 2; ++i) {
              const int64_t kk = 64 * block + 32 * (j / 2) + 8 * (lane % 4) + 2 * p + i;
              word |= AwqNibble(raw.qweight.data() + kk * (n / 8), row) << (4 * p + 16 * i);
            }
          out.packed[at] = word;
        }
  // records[tile][gi][grp (groups rounded up to even)][i]: row 16 tile + gi + 8i;
  // fp16 s | (bf16 128 + z) << 16. The padding group and rows hold s = 0, z = 0.
  const int64_t groups2 = (groups + 1) / 2 * 2;
  at = 0;
  for (int64_t tile = 0; tile < tiles; ++tile)
    for (int gi = 0; gi < 8; ++gi)
      for (int64_t grp = 0; grp < groups2; ++grp)
        for (int i = 0; i < 2; ++i, ++at) {
          const int64_t row = tile * 16 + gi + 8 * i;
          uint32_t scale = 0, zero = 0;
          if (row < n && grp < groups) {
            scale = raw.scales[static_cast<size_t>(grp * n + row)];
            zero = AwqNibble(raw.qzeros.data() + grp * (n / 8), row);
          }
          out.records[at] = scale | ((0x4300u + zero) << 16);
        }
  return out;
}

}  // namespace ernie::cuda
