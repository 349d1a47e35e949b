#include "engine/backend/cuda/awq_expert_pack.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/backend/cuda/kernels/awq_gemm.h"
#include "engine/util/status_macros.h"

namespace ernie::cuda {

namespace {

// The spans hold what k, n and group_size say (slicing indexes them).
absl::Status CheckSizes(const AwqRawLinear& w, const std::string& name) {
  const int64_t k = w.k, n = w.n, g = w.group_size;
  if (k <= 0 || n <= 0 || n % 8 != 0 || g <= 0 || k % g != 0)
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": AWQ linear of k=", k, " n=", n, " group_size=", g, " (need n % 8 == 0, k % group == 0)"));
  if (w.qweight.size() != static_cast<size_t>(k * n / 8) || w.qzeros.size() != static_cast<size_t>(k / g * n / 8) ||
      w.scales.size() != static_cast<size_t>(k / g * n))
    return absl::InvalidArgumentError(absl::StrCat(name, ": AWQ tensors of ", w.qweight.size(), ", ", w.qzeros.size(),
                                                   " and ", w.scales.size(), " elements do not match k=", k, " n=", n,
                                                   " group_size=", g));
  return absl::OkStatus();
}

// Rows [row0, row0 + rows) x columns [col0, col0 + cols) of a row-major
// [*, row_width] array, appended to `out`.
template <typename T>
void AppendBlock(std::span<const T> src, int64_t row_width, int64_t row0, int64_t rows, int64_t col0, int64_t cols,
                 std::vector<T>& out) {
  for (int64_t r = row0; r < row0 + rows; ++r) {
    const T* begin = src.data() + r * row_width + col0;
    out.insert(out.end(), begin, begin + cols);
  }
}

absl::Status Append(const AwqRawLinear& w, const std::string& name, std::vector<uint32_t>& packed,
                    std::vector<uint32_t>& records) {
  auto repacked = RepackAwqLinear(w);
  if (!repacked.ok())
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": the CUDA int4 expert kernels cannot take this linear: ", repacked.status().message()));
  packed.insert(packed.end(), repacked->packed.begin(), repacked->packed.end());
  records.insert(records.end(), repacked->records.begin(), repacked->records.end());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<AwqHostLinear> InterleaveAwqGateUp(const AwqRawLinear& gate, const AwqRawLinear& up,
                                                  const std::string& name) {
  ERNIE_RETURN_IF_ERROR(CheckSizes(gate, name + " gate_proj"));
  ERNIE_RETURN_IF_ERROR(CheckSizes(up, name + " up_proj"));
  if (gate.k != up.k || gate.n != up.n || gate.group_size != up.group_size)
    return absl::InvalidArgumentError(absl::StrCat(name, ": gate_proj [k=", gate.k, ", n=", gate.n, ", group ",
                                                   gate.group_size, "] and up_proj [k=", up.k, ", n=", up.n, ", group ",
                                                   up.group_size, "] differ"));
  const int64_t k = gate.k, n = gate.n, groups = k / gate.group_size, words = n / 8;
  AwqHostLinear out{.k = gate.k, .n = 2 * gate.n, .group_size = gate.group_size};
  out.qweight.reserve(static_cast<size_t>(2 * k * words));
  out.qzeros.reserve(static_cast<size_t>(2 * groups * words));
  out.scales.reserve(static_cast<size_t>(2 * groups * n));
  // One packed word is 8 outputs: alternate the two linears' words.
  for (int64_t r = 0; r < k; ++r)
    for (int64_t j = 0; j < words; ++j) {
      out.qweight.push_back(gate.qweight[static_cast<size_t>(r * words + j)]);
      out.qweight.push_back(up.qweight[static_cast<size_t>(r * words + j)]);
    }
  for (int64_t r = 0; r < groups; ++r)
    for (int64_t j = 0; j < words; ++j) {
      out.qzeros.push_back(gate.qzeros[static_cast<size_t>(r * words + j)]);
      out.qzeros.push_back(up.qzeros[static_cast<size_t>(r * words + j)]);
      AppendBlock(gate.scales, n, r, 1, 8 * j, 8, out.scales);
      AppendBlock(up.scales, n, r, 1, 8 * j, 8, out.scales);
    }
  return out;
}

absl::StatusOr<AwqHostLinear> AwqOutputSlice(const AwqRawLinear& w, int64_t first, int64_t width,
                                             const std::string& name) {
  ERNIE_RETURN_IF_ERROR(CheckSizes(w, name));
  if (first < 0 || width <= 0 || first % 8 != 0 || width % 8 != 0 || first + width > w.n)
    return absl::InvalidArgumentError(absl::StrCat(name, ": outputs [", first, ", ", first + width, ") of ", w.n,
                                                   " are not whole packed words (multiples of 8) inside it"));
  const int64_t groups = w.k / w.group_size;
  AwqHostLinear out{.k = w.k, .n = static_cast<int32_t>(width), .group_size = w.group_size};
  AppendBlock(w.qweight, w.n / 8, 0, w.k, first / 8, width / 8, out.qweight);
  AppendBlock(w.qzeros, w.n / 8, 0, groups, first / 8, width / 8, out.qzeros);
  AppendBlock(w.scales, w.n, 0, groups, first, width, out.scales);
  return out;
}

absl::StatusOr<AwqHostLinear> AwqInputSlice(const AwqRawLinear& w, int64_t first, int64_t rows,
                                            const std::string& name) {
  ERNIE_RETURN_IF_ERROR(CheckSizes(w, name));
  const int64_t g = w.group_size;
  if (first < 0 || rows <= 0 || first % g != 0 || rows % g != 0 || first + rows > w.k)
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": cannot split its ", w.k, " inputs into pieces of ", rows, " at ", first, ": the pieces must be whole ",
        "groups of group_size ", g, " (", rows, " % ", g, " = ", rows % g, ")"));
  AwqHostLinear out{.k = static_cast<int32_t>(rows), .n = w.n, .group_size = w.group_size};
  AppendBlock(w.qweight, w.n / 8, first, rows, 0, w.n / 8, out.qweight);
  AppendBlock(w.qzeros, w.n / 8, first / g, rows / g, 0, w.n / 8, out.qzeros);
  AppendBlock(w.scales, w.n, first / g, rows / g, 0, w.n, out.scales);
  return out;
}

absl::StatusOr<AwqExpertStacks> StackAwqExperts(std::span<const AwqMlpRaw> routed, const AwqMlpRaw* shared,
                                                int64_t width) {
  if (routed.empty()) return absl::InvalidArgumentError("a MoE layer without experts");
  const int64_t hidden = routed[0].gate.k, group = routed[0].gate.group_size;
  AwqExpertStacks s{.hidden = static_cast<int32_t>(hidden),
                    .width = static_cast<int32_t>(width),
                    .group_size = static_cast<int32_t>(group)};
  // Every expert must have one shape: the kernels step from one to the next by a fixed stride.
  auto check = [&](const AwqRawLinear& w, int64_t n, int64_t k, const std::string& what) -> absl::Status {
    if (w.n == n && w.k == k && w.group_size == group) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(what, ": AWQ linear of ", w.n, " outputs, ", w.k,
                                                   " inputs and group_size ", w.group_size, "; the experts need ", n,
                                                   ", ", k, " and ", group));
  };
  auto add = [&](const AwqMlpRaw& e) -> absl::Status {
    ERNIE_RETURN_IF_ERROR(check(e.gate, width, hidden, e.name + ".gate_proj"));
    ERNIE_RETURN_IF_ERROR(check(e.up, width, hidden, e.name + ".up_proj"));
    ERNIE_RETURN_IF_ERROR(check(e.down, hidden, width, e.name + ".down_proj"));
    ERNIE_ASSIGN_OR_RETURN(const AwqHostLinear gate_up, InterleaveAwqGateUp(e.gate, e.up, e.name));
    ERNIE_RETURN_IF_ERROR(Append(gate_up.raw(), e.name + ".gate_proj|up_proj", s.gate_up_packed, s.gate_up_records));
    ERNIE_RETURN_IF_ERROR(Append(e.down, e.name + ".down_proj", s.down_packed, s.down_records));
    ++s.experts;
    return absl::OkStatus();
  };
  // The shared experts' pieces first: a split that cuts a group is the
  // clearer error (the routed experts' down_proj would only say its k).
  struct Piece {
    AwqHostLinear gate, up, down;
    std::string name;
  };
  std::vector<Piece> pieces;
  if (shared != nullptr) {
    const int64_t total = shared->gate.n;
    if (width <= 0 || total % width != 0)
      return absl::InvalidArgumentError(absl::StrCat(shared->name, ".gate_proj: width ", total,
                                                     " is not a multiple of moe_intermediate_size ", width));
    for (int64_t first = 0; first < total; first += width) {
      Piece p{.name = absl::StrCat(shared->name, " (columns ", first, "..", first + width - 1, ")")};
      ERNIE_ASSIGN_OR_RETURN(p.gate, AwqOutputSlice(shared->gate, first, width, shared->name + ".gate_proj"));
      ERNIE_ASSIGN_OR_RETURN(p.up, AwqOutputSlice(shared->up, first, width, shared->name + ".up_proj"));
      ERNIE_ASSIGN_OR_RETURN(p.down, AwqInputSlice(shared->down, first, width, shared->name + ".down_proj"));
      pieces.push_back(std::move(p));
    }
  }
  for (const AwqMlpRaw& e : routed) ERNIE_RETURN_IF_ERROR(add(e));
  for (const Piece& p : pieces)
    ERNIE_RETURN_IF_ERROR(add({.gate = p.gate.raw(), .up = p.up.raw(), .down = p.down.raw(), .name = p.name}));
  return s;
}

}  // namespace ernie::cuda
