#include "tests/engine/cuda/backend_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <numeric>

namespace ernie::testing {

std::string TestDataDir() {
  const char* env = std::getenv("ERNIE_TEST_DATA_DIR");
  return env != nullptr && *env != '\0' ? std::string(env) : std::string(ERNIE_TEST_DATA_DIR);
}

std::vector<std::string> ReferenceCases(const std::string& folder) {
  std::vector<std::string> names;
  std::error_code error;  // a missing folder gives no cases (the suite then fails as uninstantiated)
  for (const auto& entry : std::filesystem::directory_iterator(TestDataDir() + "/" + folder, error))
    if (std::filesystem::exists(entry.path() / "config.json"))
      names.push_back(folder + "/" + entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<int32_t> ConsecutiveBlocks(int64_t tokens, int64_t block_size, int32_t first) {
  std::vector<int32_t> table(static_cast<size_t>((tokens + block_size - 1) / block_size));
  std::iota(table.begin(), table.end(), first);
  return table;
}

std::vector<float> TeacherForced(Backend& backend, std::span<const int32_t> tokens, int32_t cached, int32_t chunk,
                                 std::span<const int32_t> table) {
  const int64_t vocab = backend.vocab_size();
  std::vector<float> logits(tokens.size() * static_cast<size_t>(vocab));
  for (size_t begin = 0; begin < tokens.size(); begin += static_cast<size_t>(chunk)) {
    const size_t n = std::min(static_cast<size_t>(chunk), tokens.size() - begin);
    const int32_t first_pos = cached + static_cast<int32_t>(begin);
    std::vector<int32_t> pos(n), rows(n);
    std::iota(pos.begin(), pos.end(), first_pos);
    std::iota(rows.begin(), rows.end(), 0);
    const SequenceSlice seq{0, static_cast<int32_t>(n), first_pos, table};
    const StepBatch batch{tokens.subspan(begin, n), pos, {&seq, 1}, rows};
    const absl::Status s =
        backend.Forward(batch, std::span<float>(logits).subspan(begin * static_cast<size_t>(vocab)));
    EXPECT_TRUE(s.ok()) << backend.name() << ": " << s;
    if (!s.ok()) break;
  }
  return logits;
}

double RelativeL2(const float* a, const float* ref, int64_t n) {
  double diff = 0, norm = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(a[i]) - ref[i];
    diff += d * d;
    norm += static_cast<double>(ref[i]) * ref[i];
  }
  if (std::isnan(diff)) return INFINITY;
  return std::sqrt(diff / std::max(norm, 1e-30));
}

Top2 ArgmaxWithGap(const float* row, int64_t vocab) {
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; ++i)
    if (row[i] > row[best]) best = i;
  float second = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i)
    if (i != best) second = std::max(second, row[i]);
  return {static_cast<int32_t>(best), row[best] - second};
}

}  // namespace ernie::testing
