#include "engine/backend/cpu/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace ernie::cpu {

void WriteKv(const StepBatch& batch, const float* k, const float* v, int64_t layer, CpuKvCache& cache) {
  const KvCacheShape& s = cache.shape();
  const int64_t row_floats = s.num_kv_heads * s.head_dim;
  const size_t head_bytes = static_cast<size_t>(s.head_dim) * sizeof(float);
  for (const SequenceSlice& seq : batch.sequences) {
    for (int32_t j = 0; j < seq.num_new_tokens; ++j) {
      const int64_t t = seq.first_token + j;
      const int64_t pos = int64_t{seq.num_cached_tokens} + j;
      const int64_t block = seq.block_table[static_cast<size_t>(pos / s.block_size)];
      const int64_t row = pos % s.block_size;
      for (int64_t h = 0; h < s.num_kv_heads; ++h) {
        std::memcpy(cache.keys(layer, block, h) + row * s.head_dim, k + t * row_floats + h * s.head_dim, head_bytes);
        std::memcpy(cache.values(layer, block, h) + row * s.head_dim, v + t * row_floats + h * s.head_dim, head_bytes);
      }
    }
  }
}

namespace {

// One query row against its sequence's cached keys: the textbook two-pass
// softmax (scores, then max-subtracted exponentials), float32 throughout.
void AttendOne(const float* q, const SequenceSlice& seq, int64_t context, int64_t kv_head, int64_t layer,
               const CpuKvCache& cache, float scale, float* out, std::vector<float>& scores) {
  const KvCacheShape& s = cache.shape();
  const int64_t d = s.head_dim;
  scores.resize(static_cast<size_t>(context));
  float max_score = -INFINITY;
  for (int64_t p = 0; p < context; ++p) {
    const float* key = cache.keys(layer, seq.block_table[static_cast<size_t>(p / s.block_size)], kv_head) +
                       (p % s.block_size) * d;
    float dot = 0.0f;
    for (int64_t i = 0; i < d; ++i) dot += q[i] * key[i];
    scores[static_cast<size_t>(p)] = dot * scale;
    max_score = std::max(max_score, scores[static_cast<size_t>(p)]);
  }
  float denom = 0.0f;
  for (int64_t p = 0; p < context; ++p) {
    scores[static_cast<size_t>(p)] = std::exp(scores[static_cast<size_t>(p)] - max_score);
    denom += scores[static_cast<size_t>(p)];
  }
  std::fill(out, out + d, 0.0f);
  for (int64_t p = 0; p < context; ++p) {
    const float* value = cache.values(layer, seq.block_table[static_cast<size_t>(p / s.block_size)], kv_head) +
                         (p % s.block_size) * d;
    const float w = scores[static_cast<size_t>(p)] / denom;
    for (int64_t i = 0; i < d; ++i) out[i] += w * value[i];
  }
}

}  // namespace

void SequenceOfEachToken(const StepBatch& batch, std::vector<int32_t>* seq_of_token) {
  seq_of_token->resize(batch.token_ids.size());
  for (size_t i = 0; i < batch.sequences.size(); ++i)
    for (int32_t j = 0; j < batch.sequences[i].num_new_tokens; ++j)
      (*seq_of_token)[static_cast<size_t>(batch.sequences[i].first_token + j)] = static_cast<int32_t>(i);
}

void PagedAttention(const StepBatch& batch, std::span<const int32_t> seq_of_token, const float* q,
                    int64_t num_heads, int64_t layer, const CpuKvCache& cache, float scale, float* out,
                    ThreadPool& pool) {
  const KvCacheShape& s = cache.shape();
  const int64_t group = num_heads / s.num_kv_heads;
  const int64_t row_floats = num_heads * s.head_dim;
  // Work items are (token, head) pairs; each knows its sequence.
  const int64_t items = static_cast<int64_t>(batch.token_ids.size()) * num_heads;
  pool.ParallelFor(items, 4, [&](int64_t begin, int64_t end) {
    std::vector<float> scores;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t t = item / num_heads, h = item % num_heads;
      const SequenceSlice& seq = batch.sequences[static_cast<size_t>(seq_of_token[static_cast<size_t>(t)])];
      const int64_t context = int64_t{batch.positions[static_cast<size_t>(t)]} + 1;  // causal: up to itself
      AttendOne(q + t * row_floats + h * s.head_dim, seq, context, h / group, layer, cache, scale,
                out + t * row_floats + h * s.head_dim, scores);
    }
  });
}

}  // namespace ernie::cpu
