// Execution layer: decode attention on a CPU that reads the paged KV cache in place, through the block
// table. The C++ twin of the Triton kernel in paged_attention.py, behind the "cpp" attention backend
// (layers/attention_cpp.py builds this file with torch's C++ extension loader the first time it is used).
//
// Why a kernel of our own: PyTorch has no CPU operator that follows a block table. The torch backend
// therefore copies each sequence's K/V rows out of the cache and runs SDPA over the copy, so every row is
// moved three times (read from the cache, written to the copy, read back from it). Here each row is read
// once: for every sequence, the positions are walked in order, each position's row found through the block
// table, and the softmax is accumulated online (FlashAttention's running maximum m, denominator l and
// weighted sum acc; when a chunk raises the maximum, what was accumulated is rescaled by exp(m_old - m_new)).
//
// One task per sequence, all of its heads, the tasks shared among PyTorch's threads. A position's cache
// slot holds the rows of every K/V head side by side (layout (blocks, block_size, kv_heads, head_dim)), so
// a task reads each slot whole, front to back; each row is used by every query head that shares it (GQA)
// while it is in the L1 cache. The arithmetic is written with ATen's own vector type, at::vec::Vectorized
// <float> (8 floats with AVX2, 16 with AVX-512, 4 with NEON; a plain loop elsewhere), the same type ATen's
// CPU operators and inductor's generated C++ use: its exp is SLEEF's vectorised one, which libtorch already
// carries (the compiler's std::exp is one value at a time, and a position costs one exp per query head).
// Two ways of ordering the loops keep the work in registers:
// - the scores: four positions at once against one query head, each query vector loaded once for the four,
//   four independent running sums (one sum alone is a chain where each addition waits for the last), each
//   added across its lanes only at the end;
// - the weighted sum of V: for one query head, a block of four vectors of its accumulator held in registers
//   over the chunk's positions, loaded and stored once per chunk instead of once per position.
//
// Measured on a 2-core AMD EPYC (AVX2), one layer's attention alone, one thread: 32 sequences of ~165
// positions with the shipped model's heads (4 query / 2 K/V heads of 64) 0.56 -> 0.26 ms, and 16 sequences
// of ~74 with Qwen3-0.6B's (16 / 8 of 128) 1.01 -> 0.49 ms, against the previous kernel (scalar exp, one
// position's dot product at a time in 16 partial sums the compiler vectorised).
//
// Where the rows come from matters as much as the arithmetic. A batch's K/V rows are read once per step, so
// in a real step, with the weights and the other layers' caches passing through the cache between two
// visits, they come from memory; the hardware's prefetcher does not see a pattern in reads this spread out
// (each row's halves go to different heads, a block of rows per sequence), and the kernel waits for each
// row. So when a call reads more than kPrefetchBytes, each head, before it scores its chunk, asks for its
// share of the next chunk's rows (__builtin_prefetch): the memory then works while the arithmetic runs.
// Measured on a 2-core AMD EPYC (Zen 4, AVX-512), one thread, 32 sequences of 190 positions with the
// shipped model's heads, caches read from memory (eight layers' in turn): 1.00-1.18 -> 0.50-0.54 ms a layer;
// in the engine, 32 sequences of 128-256 positions, the three layers' attention 3.16 -> 2.48 ms a step.
// Rows that stay in the cache (one layer's, read again and again) gain nothing and pay the instructions
// (0.22 -> 0.31-0.37 ms), hence the threshold. Emits no events.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace {

using Vec = at::vec::Vectorized<float>;
constexpr int64_t kChunk = 16;  // positions scored before the running softmax is updated
constexpr int64_t kMaxHeads = 64;     // query heads (Qwen3: 16 to 64)
constexpr int64_t kMaxHeadDim = 256;  // Qwen3: 128
constexpr int64_t kAccVecs = 4;  // vectors of a head's accumulator held in registers at a time
// A call that reads more K/V bytes than this asks for its rows ahead: more than a core's own cache holds, so
// most of them come from memory.
constexpr int64_t kPrefetchBytes = 4 << 20;
constexpr int64_t kFloatsPerLine = 64 / sizeof(float);  // a cache line

inline float add_lanes(const Vec& v) {
  return at::vec::vec_reduce_all<float>([](Vec& a, Vec& b) { return a + b; }, v);
}

// Ask for the n floats of a slot's K row and of its V row ahead of their use.
inline void prefetch_rows(const float* k, const float* v, int64_t n) {
#if defined(__GNUC__) || defined(__clang__)
  for (int64_t i = 0; i < n; i += kFloatsPerLine) {
    __builtin_prefetch(k + i, 0, 1);
    __builtin_prefetch(v + i, 0, 1);
  }
#endif
}

// s[i] = scale * (q . k_rows[i][0:head_dim]) for the n positions of a chunk.
inline void score_chunk(const float* q, const float* const* k_rows, int64_t offset, int64_t n, int64_t head_dim,
                        float scale, float* s) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    Vec c0(0.f), c1(0.f), c2(0.f), c3(0.f);
    for (int64_t d = 0; d < head_dim; d += Vec::size()) {
      const Vec qv = Vec::loadu(q + d);
      c0 = at::vec::fmadd(qv, Vec::loadu(k_rows[i] + offset + d), c0);
      c1 = at::vec::fmadd(qv, Vec::loadu(k_rows[i + 1] + offset + d), c1);
      c2 = at::vec::fmadd(qv, Vec::loadu(k_rows[i + 2] + offset + d), c2);
      c3 = at::vec::fmadd(qv, Vec::loadu(k_rows[i + 3] + offset + d), c3);
    }
    s[i] = add_lanes(c0) * scale;
    s[i + 1] = add_lanes(c1) * scale;
    s[i + 2] = add_lanes(c2) * scale;
    s[i + 3] = add_lanes(c3) * scale;
  }
  for (; i < n; ++i) {
    Vec c(0.f);
    for (int64_t d = 0; d < head_dim; d += Vec::size())
      c = at::vec::fmadd(Vec::loadu(q + d), Vec::loadu(k_rows[i] + offset + d), c);
    s[i] = add_lanes(c) * scale;
  }
}

// acc[d:d + kVecs * Vec::size()] += sum over the chunk's positions i of p[i] * v_rows[i][offset + d + ...].
template <int64_t kVecs>
inline void accumulate_values(float* acc, const float* p, const float* const* v_rows, int64_t offset, int64_t n) {
  Vec a[kVecs];
  for (int64_t j = 0; j < kVecs; ++j) a[j] = Vec::loadu(acc + j * Vec::size());
  for (int64_t i = 0; i < n; ++i) {
    const Vec weight(p[i]);
    const float* v = v_rows[i] + offset;
    for (int64_t j = 0; j < kVecs; ++j) a[j] = at::vec::fmadd(weight, Vec::loadu(v + j * Vec::size()), a[j]);
  }
  for (int64_t j = 0; j < kVecs; ++j) a[j].store(acc + j * Vec::size());
}

at::Tensor paged_decode_attention(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                                  const at::Tensor& block_tables, const at::Tensor& context_lens, double scale) {
  TORCH_CHECK(q.dim() == 3 && k_cache.dim() == 4 && v_cache.sizes() == k_cache.sizes(),
              "expected q (batch, heads, head_dim) and caches (blocks, block_size, kv_heads, head_dim)");
  TORCH_CHECK(q.scalar_type() == at::kFloat && k_cache.scalar_type() == at::kFloat &&
                  v_cache.scalar_type() == at::kFloat,
              "the cpp decode kernel computes in float32; got q ", q.scalar_type(), ", cache ",
              k_cache.scalar_type());
  TORCH_CHECK(block_tables.scalar_type() == at::kInt && context_lens.scalar_type() == at::kInt,
              "block_tables and context_lens must be int32");
  TORCH_CHECK(q.is_contiguous() && k_cache.is_contiguous() && v_cache.is_contiguous() &&
                  block_tables.is_contiguous() && context_lens.is_contiguous(),
              "the cpp decode kernel needs contiguous tensors");
  const int64_t batch = q.size(0), heads = q.size(1), head_dim = q.size(2);
  const int64_t block_size = k_cache.size(1), kv_heads = k_cache.size(2);
  TORCH_CHECK(k_cache.size(3) == head_dim && heads % kv_heads == 0, "q and the cache disagree on head shapes");
  TORCH_CHECK(block_tables.size(0) == batch && context_lens.size(0) == batch,
              "one block table and one context length per sequence");
  const int64_t group = heads / kv_heads, max_blocks = block_tables.size(1);
  TORCH_CHECK(heads <= kMaxHeads && head_dim <= kMaxHeadDim, "the cpp decode kernel handles up to ", kMaxHeads,
              " query heads and head_dim up to ", kMaxHeadDim, "; got ", heads, " and ", head_dim);
  TORCH_CHECK(head_dim % Vec::size() == 0, "the cpp decode kernel needs a head_dim that is a multiple of ",
              Vec::size(), " (its vector width); got ", head_dim);
  const int64_t row = kv_heads * head_dim;  // floats per cache slot
  const int64_t block_width = kAccVecs * Vec::size();

  auto out = at::empty_like(q);
  const float* q_all = q.data_ptr<float>();
  const float* k_all = k_cache.data_ptr<float>();
  const float* v_all = v_cache.data_ptr<float>();
  const int32_t* tables = block_tables.data_ptr<int32_t>();
  const int32_t* lens = context_lens.data_ptr<int32_t>();
  float* out_all = out.data_ptr<float>();
  const float scale_f = static_cast<float>(scale);
  int64_t positions = 0;
  for (int64_t b = 0; b < batch; ++b) {
    TORCH_CHECK(lens[b] > 0 && lens[b] <= max_blocks * block_size, "context length ", lens[b], " of sequence ", b,
                " does not fit its block table of ", max_blocks, " blocks");
    positions += lens[b];
  }
  const bool prefetch = positions * row * 2 * static_cast<int64_t>(sizeof(float)) > kPrefetchBytes;

  at::parallel_for(0, batch, 1, [&](int64_t first, int64_t last) {
    // Fixed-size local arrays: the compiler then knows that none of them overlaps the cache or another.
    alignas(64) float acc[kMaxHeads][kMaxHeadDim];
    alignas(64) float score[kMaxHeads][kChunk];
    float m[kMaxHeads], l[kMaxHeads];
    int64_t kv_offset[kMaxHeads];  // where query head h's K/V head starts in a slot
    for (int64_t h = 0; h < heads; ++h) kv_offset[h] = (h / group) * head_dim;
    const float* k_rows[kChunk];
    const float* v_rows[kChunk];
    for (int64_t b = first; b < last; ++b) {
      const int64_t len = lens[b];
      const float* q_seq = q_all + b * heads * head_dim;
      for (int64_t h = 0; h < heads; ++h) std::fill(acc[h], acc[h] + head_dim, 0.f);
      std::fill(m, m + heads, -std::numeric_limits<float>::infinity());
      std::fill(l, l + heads, 0.f);
      for (int64_t start = 0; start < len; start += kChunk) {
        const int64_t n = std::min(kChunk, len - start);
        for (int64_t i = 0; i < n; ++i) {
          const int64_t pos = start + i;
          const int64_t slot = static_cast<int64_t>(tables[b * max_blocks + pos / block_size]) * block_size +
                               pos % block_size;
          k_rows[i] = k_all + slot * row;
          v_rows[i] = v_all + slot * row;
        }
        for (int64_t h = 0; h < heads; ++h) {
          // This head's share of the next chunk's rows, so that the requests are spread over the chunk.
          for (int64_t i = h * kChunk / heads; prefetch && i < (h + 1) * kChunk / heads; ++i) {
            const int64_t pos = start + kChunk + i;
            if (pos >= len) break;
            const int64_t slot = static_cast<int64_t>(tables[b * max_blocks + pos / block_size]) * block_size +
                                 pos % block_size;
            prefetch_rows(k_all + slot * row, v_all + slot * row, row);
          }
          float* s = score[h];
          score_chunk(q_seq + h * head_dim, k_rows, kv_offset[h], n, head_dim, scale_f, s);
          const float chunk_max = std::max(m[h], *std::max_element(s, s + n));
          const float rescale = std::exp(m[h] - chunk_max);  // exp(-inf) = 0 on the first chunk
          if (rescale != 1.f)
            for (int64_t d = 0; d < head_dim; d += Vec::size())
              (Vec::loadu(acc[h] + d) * Vec(rescale)).store(acc[h] + d);
          // p = exp(s - max), a vector at a time; the lanes past the chunk's end are set to 0 before the sum.
          Vec total(0.f);
          for (int64_t i = 0; i < n; i += Vec::size()) {
            const int64_t width = std::min<int64_t>(Vec::size(), n - i);
            const Vec p = Vec::set(Vec(0.f), (Vec::loadu(s + i, width) - Vec(chunk_max)).exp(), width);
            p.store(s + i, width);
            total = total + p;
          }
          m[h] = chunk_max;
          l[h] = l[h] * rescale + add_lanes(total);
        }
        for (int64_t h = 0; h < heads; ++h) {
          int64_t d = 0;
          for (; d + block_width <= head_dim; d += block_width)
            accumulate_values<kAccVecs>(acc[h] + d, score[h], v_rows, kv_offset[h] + d, n);
          for (; d < head_dim; d += Vec::size())
            accumulate_values<1>(acc[h] + d, score[h], v_rows, kv_offset[h] + d, n);
        }
      }
      for (int64_t h = 0; h < heads; ++h) {
        float* o = out_all + (b * heads + h) * head_dim;
        const Vec inv(1.f / l[h]);
        for (int64_t d = 0; d < head_dim; d += Vec::size()) (Vec::loadu(acc[h] + d) * inv).store(o + d);
      }
    }
  });
  return out;
}

}  // namespace

TORCH_LIBRARY(nanovllm_teach_cpp, m) {
  m.def("paged_decode_attention(Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_tables, "
        "Tensor context_lens, float scale) -> Tensor");
  m.impl("paged_decode_attention", c10::DispatchKey::CPU, TORCH_FN(paged_decode_attention));
}
