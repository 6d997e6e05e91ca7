// Execution layer: the whole decode forward of Qwen3 on a CPU as one native call — the CPU's counterpart of a
// CUDA graph (engine/compiled_decode.py builds this file, loads it and calls it for every decode step).
//
// Why: the shipped model's decode step is ~70 small tensor operations (per layer: two norms, three or four
// multiplies, the query/key norms, the rotation, the K/V store, the attention, the gate). Issued from Python,
// each pays the interpreter and torch's Python binding, a few microseconds apiece: together several times the
// arithmetic. A CUDA graph removes that cost on a GPU by recording the kernel launches once and replaying
// them; here the same list of operations is written out in C++ once and compiled, so a step is one call
// from Python.
//
// From 16 rows on (4 for a weight with rows longer than kShortRow floats, as every real Qwen3's), the multiplies are
// oneDNN's packed multiply, through the same operator as the eager layers (layers/onednn_linear.py); the attention
// is the "cpp" backend's kernel (kernels/paged_decode_cpu.cpp, found through the dispatcher). Everything else is a
// loop of its own, written with ATen's vector type at::vec::Vectorized<float> as the attention kernel is: the
// multiplies of fewer rows, the embedding lookup, each RMSNorm with the residual add before it, the query/key norms
// with the rotation and the K/V store (one pass over the qkv rows), SiLU of the gate times the up projection, the
// argmax. Through ATen those were ~60 calls a step, and even in C++ each call costs a dispatch and an allocation,
// and ATen's RMSNorm on a CPU is itself ~10 operations (pow, mean, add, rsqrt, mul, ...): at one sequence they took
// more time than the multiplies (0.71 -> 0.41 ms a step on a Xeon). A decode step of a few sequences is a few
// matrix-vector products, which read every weight once and do little arithmetic with it: the loop here computes
// eight outputs at a time, each a dot product of a weight row with the input row, so that the input stays in
// registers and eight independent sums hide the latency of each multiply-add. On a 2-core AMD EPYC it reads the
// shipped model's 13 weights for one row in 175-187 us against at::mm's 233-282 (F.linear's path), and 4 rows in 343
// against 608 (one thread). The price: these loops add in another order than ATen's operators, so the logits equal
// the eager step's to rounding (~1e-6 relative), no longer bitwise; the greedy tokens are identical to the eager
// step's and to transformers' (tests/test_compiled_decode.py, tests/test_engine_parity.py). The step ends with the
// LM head, and, when every row is greedy, with the argmax: a greedy step returns its token ids and nothing of it
// runs in Python but the call. Emits no events.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <torch/extension.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace {

// The tensors of one decoder layer, in the order Python hands them over (engine/compiled_decode.py): the
// four linears' weights twice, plain and packed (the same tensor when the model has no packed weights).
constexpr int64_t kPerLayer = 12;
enum Weight { kInputNorm, kQkv, kQNorm, kKNorm, kOProj, kPostNorm, kGateUp, kDown,
              kQkvPacked, kOProjPacked, kGateUpPacked, kDownPacked };
constexpr Weight kLinears[] = {kQkv, kOProj, kGateUp, kDown};  // a layer's linears, in the order of its step
using Vec = at::vec::Vectorized<float>;
constexpr int64_t kMaxHeadDim = 256;
constexpr int64_t kOutputsAtOnce = 8;  // weight rows of a few-row multiply computed together
constexpr int64_t kBytesPerTask = 64 * 1024;  // the least weight a thread is given (a wake-up costs µs)
constexpr int64_t kShortRow = 512;  // floats: a weight with rows this short is interleaved for the few-row loop
// A weight with longer rows (every real Qwen3's) goes through oneDNN's packed multiply from this many rows
// of x. Such a weight is read from memory, and oneDNN multiplies while the next part of it streams in, which
// the few-row loop does not: it reads a block of rows, then multiplies it with each row of x from the cache.
// Qwen3-0.6B's four weights of 4 layers (252 MB), oneDNN's time over the loop's, one thread: 1.00x at 4 rows,
// 0.81x at 6, 0.92x at 8, 0.80x at 12; two threads 1.02x, 0.85x, 1.03x, 0.85x (a 2-core AMD EPYC). The
// shipped model's short rows stay in the cache, where the loop is ahead of oneDNN's fixed cost a call until
// packed_min_rows.
constexpr int64_t kLongRowPackedMinRows = 4;

inline float add_lanes(const Vec& v) {
  return at::vec::vec_reduce_all<float>([](Vec& a, Vec& b) { return a + b; }, v);
}

// The sum of x[i]^2 (n a multiple of the vector width: the model's widths are, CompiledDecode checks).
inline float sum_of_squares(const float* x, int64_t n) {
  Vec sum(0.f);
  for (int64_t i = 0; i < n; i += Vec::size()) {
    const Vec v = Vec::loadu(x + i);
    sum = at::vec::fmadd(v, v, sum);
  }
  return add_lanes(sum);
}

// RMSNorm of one row of n: out = x / sqrt(mean(x^2) + eps) * w.
inline void rms_norm_row(const float* x, const float* w, float* out, int64_t n, float eps) {
  const Vec r(1.f / std::sqrt(sum_of_squares(x, n) / static_cast<float>(n) + eps));
  for (int64_t i = 0; i < n; i += Vec::size()) (Vec::loadu(x + i) * r * Vec::loadu(w + i)).store(out + i);
}

// y[t, o] = x[t] . w[o] for outputs o .. o + kRows - 1 and kX rows t of x: the kRows weight rows are read
// once for the kX rows. kInterleaved: the block is stored as LinearWeight interleaves it, vector d of row r at
// w[d * kRows + r * Vec::size()]; else row after row. Either way each output adds the same products in the
// same order, whatever kX: the results are bitwise the same.
template <int64_t kRows, bool kInterleaved, int64_t kX>
inline void dot_block(const float* x, int64_t x_stride, const float* w, int64_t in_f, float* y, int64_t out_f) {
  Vec sum[kX][kRows];
  for (int64_t t = 0; t < kX; ++t)
    for (int64_t r = 0; r < kRows; ++r) sum[t][r] = Vec(0.f);
  for (int64_t d = 0; d < in_f; d += Vec::size()) {
    Vec xv[kX];
    for (int64_t t = 0; t < kX; ++t) xv[t] = Vec::loadu(x + t * x_stride + d);
    for (int64_t r = 0; r < kRows; ++r) {
      const Vec wv = Vec::loadu(kInterleaved ? w + d * kRows + r * Vec::size() : w + r * in_f + d);
      for (int64_t t = 0; t < kX; ++t) sum[t][r] = at::vec::fmadd(xv[t], wv, sum[t][r]);
    }
  }
  for (int64_t t = 0; t < kX; ++t)
    for (int64_t r = 0; r < kRows; ++r) y[t * out_f + r] = add_lanes(sum[t][r]);
}

// The block of outputs o .. o + kRows - 1 for every row of x. A weight read as stored (rows of more than
// kShortRow floats: every real Qwen3's) multiplies two rows of x at a time, which halves the loads of the
// weight from the cache per multiply-add: Qwen3-0.6B's four weights of 4 layers (252 MB, from memory) for 2
// rows took 0.88x the time of one row at a time on one thread, 0.92x on two (a 2-core AMD EPYC). The
// interleaved short rows gained only at 2-4 rows and lost from 8 (1.05-1.2x), so they go one row at a time.
template <int64_t kRows, bool kInterleaved>
inline void dot_rows(const float* x, int64_t rows, int64_t x_stride, const float* w, int64_t in_f, float* y,
                     int64_t out_f) {
  int64_t t = 0;
  if constexpr (!kInterleaved)
    for (; t + 2 <= rows; t += 2)
      dot_block<kRows, false, 2>(x + t * x_stride, x_stride, w, in_f, y + t * out_f, out_f);
  for (; t < rows; ++t) dot_block<kRows, kInterleaved, 1>(x + t * x_stride, x_stride, w, in_f, y + t * out_f, out_f);
}

// A linear's weight as the checkpoint stores it (plain), and as the few-row loop reads it (w): the plain
// weight itself, or a copy interleaved for that loop. Eight rows read side by side are eight streams of
// memory, and the hardware prefetcher needs a stretch of each before it runs ahead: a row of kShortRow floats or fewer
// (the shipped model's 256 and 512) is over about when it has caught on. So such a weight is copied once
// (DecodeStep puts the copies in 2 MB pages), each block of kOutputsAtOnce rows interleaved a vector at a time,
// which the loop then reads as one stream. Measured on a 2-core AMD EPYC (Zen 4), one thread, the shipped model's
// 13 weights for one row: 94-98 -> 80 us from the L3 cache, 311-350 -> 176-195 us when other data has pushed them
// out; rows of 512 floats 1.03x and 1.26x; rows of 1,024 floats and more, as every real Qwen3's, 0.84-1.14x: there
// the weight is read as it is, with no copy.
struct LinearWeight {
  at::Tensor plain, w;
  bool interleaved;

  explicit LinearWeight(const at::Tensor& plain_)
      : plain(plain_), w(plain_),
        interleaved(plain_.size(1) <= kShortRow && plain_.size(0) % kOutputsAtOnce == 0) {}

  // Write the interleaved copy into `into` (plain.numel() floats) and read it from there.
  void interleave_into(const at::Tensor& into) {
    const int64_t out_f = plain.size(0), in_f = plain.size(1);
    const int64_t blocks = out_f / kOutputsAtOnce, vectors = in_f / Vec::size();
    w = into.view({blocks, vectors, kOutputsAtOnce, Vec::size()});
    w.copy_(plain.reshape({blocks, kOutputsAtOnce, vectors, Vec::size()}).permute({0, 2, 1, 3}));
  }
};

// `floats` zeroed floats in memory of their own, which Linux is asked to back with 2 MB pages (a transparent huge
// page where its setting is "madvise" or "always"). The interleaved weights are read in full every step, and with
// 4 KB pages the shipped model's 8 MB of them span ~2,000 pages, each an address translation the processor must
// hold in its translation cache (the TLB) to read it fast; the interpreter's work between two steps pushes many
// out, so a step began with page-table walks. In 2 MB pages the weights need four translations. One request on
// the shipped model, 15 alternating pairs on a 2-core AMD EPYC (Zen 4), one thread: 0.223 -> 0.194 ms a token
// (the same copy in 4 KB pages: 0.94x). Where the system does not give such pages (another system, or the setting
// "never") this is ordinary memory.
at::Tensor huge_page_floats(int64_t floats) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr size_t kHugePage = 2 << 20;
  const size_t bytes = (static_cast<size_t>(floats) * sizeof(float) + kHugePage - 1) / kHugePage * kHugePage;
  const size_t length = bytes + kHugePage;  // room to start at a 2 MB boundary
  void* base = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base != MAP_FAILED) {
    const uintptr_t address = reinterpret_cast<uintptr_t>(base);
    void* start = reinterpret_cast<void*>((address + kHugePage - 1) / kHugePage * kHugePage);
    madvise(start, bytes, MADV_HUGEPAGE);  // a request: without it the pages stay 4 KB, which is only slower
    return at::from_blob(start, {floats}, [base, length](void*) { munmap(base, length); }, at::kFloat);
  }
#endif
  return at::zeros({floats}, at::kFloat);
}

// y = x @ w.T for a few rows of x (each row contiguous), w (out_f, in_f) as the checkpoint stores it (in_f a
// multiple of the vector width) or interleaved (LinearWeight), y (rows, out_f) contiguous. The blocks of
// kOutputsAtOnce outputs are shared among PyTorch's threads (each thread then reads its own part of the
// weight: a big model's matrix-vector products are limited by how fast memory is read, and two cores read
// faster than one); a small weight stays on one thread.
void few_rows_linear(const at::Tensor& x, const LinearWeight& weight, at::Tensor& y) {
  const int64_t rows = x.size(0), out_f = weight.plain.size(0), in_f = weight.plain.size(1);
  const int64_t x_stride = x.stride(0);
  const float* xs = x.data_ptr<float>();
  const float* ws = weight.w.data_ptr<float>();
  float* ys = y.data_ptr<float>();
  const int64_t blocks = (out_f + kOutputsAtOnce - 1) / kOutputsAtOnce;
  const int64_t grain = std::max<int64_t>(1, kBytesPerTask / (kOutputsAtOnce * in_f * sizeof(float)));
  at::parallel_for(0, blocks, grain, [&](int64_t first, int64_t last) {
    for (int64_t o = first * kOutputsAtOnce; o < std::min(last * kOutputsAtOnce, out_f);) {
      if (weight.interleaved) {  // out_f is whole blocks
        dot_rows<kOutputsAtOnce, true>(xs, rows, x_stride, ws + o * in_f, in_f, ys + o, out_f);
        o += kOutputsAtOnce;
      } else if (o + kOutputsAtOnce <= out_f) {
        dot_rows<kOutputsAtOnce, false>(xs, rows, x_stride, ws + o * in_f, in_f, ys + o, out_f);
        o += kOutputsAtOnce;
      } else {  // the last outputs, fewer than kOutputsAtOnce
        dot_rows<1, false>(xs, rows, x_stride, ws + o * in_f, in_f, ys + o, out_f);
        ++o;
      }
    }
  });
}

struct DecodeStep {
  std::vector<at::Tensor> layers;  // kPerLayer per layer
  std::vector<at::Tensor> k_caches, v_caches;  // each (blocks, block_size, kv_heads, head_dim)
  at::Tensor embed, final_norm, cos_sin;  // cos_sin: (positions, 2, head_dim), RotaryEmbedding's table
  at::Tensor lm_head, lm_head_packed;  // the LM head's weight, plain and packed (or plain again)
  std::vector<LinearWeight> linears;  // per layer, its qkv, o, gate_up and down projections (kLinears)
  std::optional<LinearWeight> lm_head_linear;
  int64_t heads, kv_heads, head_dim;
  int64_t packed_min_rows;  // fewer rows multiply in few_rows_linear (layers/onednn_linear.py's PACKED_MIN_ROWS)
  double eps, scale;
  bool packed;
  std::optional<c10::OperatorHandle> onednn_linear;  // the packed multiply, when the weights are packed
  c10::TypedOperatorHandle<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                      const at::Tensor&, double)>
      attention;

  DecodeStep(std::vector<at::Tensor> layers_, std::vector<at::Tensor> k_caches_, std::vector<at::Tensor> v_caches_,
             at::Tensor embed_, at::Tensor final_norm_, at::Tensor cos_sin_, at::Tensor lm_head_,
             at::Tensor lm_head_packed_, int64_t heads_, int64_t kv_heads_, int64_t head_dim_,
             int64_t packed_min_rows_, double eps_, double scale_, bool packed_)
      : layers(std::move(layers_)), k_caches(std::move(k_caches_)), v_caches(std::move(v_caches_)),
        embed(std::move(embed_)), final_norm(std::move(final_norm_)), cos_sin(std::move(cos_sin_)),
        lm_head(std::move(lm_head_)), lm_head_packed(std::move(lm_head_packed_)), heads(heads_),
        kv_heads(kv_heads_), head_dim(head_dim_), packed_min_rows(packed_min_rows_), eps(eps_), scale(scale_),
        packed(packed_),
        attention(c10::Dispatcher::singleton()
                      .findSchemaOrThrow("nanovllm_teach_cpp::paged_decode_attention", "")
                      .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                        const at::Tensor&, double)>()) {
    if (packed) onednn_linear = c10::Dispatcher::singleton().findSchemaOrThrow("mkldnn::_linear_pointwise", "");
    TORCH_CHECK(layers.size() == k_caches.size() * kPerLayer && k_caches.size() == v_caches.size(),
                "expected ", kPerLayer, " tensors and two caches per layer");
    TORCH_CHECK(head_dim % Vec::size() == 0 && head_dim <= kMaxHeadDim, "head_dim must be a multiple of ",
                Vec::size(), " and at most ", kMaxHeadDim);
    TORCH_CHECK(embed.size(1) % Vec::size() == 0 && layers[kGateUp].size(0) % (2 * Vec::size()) == 0,
                "hidden_size and intermediate_size must be multiples of ", Vec::size());
    for (size_t i = 0; i < layers.size(); i += kPerLayer)
      for (const Weight which : kLinears) linears.emplace_back(layers[i + which]);
    lm_head_linear.emplace(lm_head);
    // Every interleaved copy in one buffer of 2 MB pages (huge_page_floats), one after another; a real Qwen3 has
    // none (its rows are long).
    std::vector<LinearWeight*> copies;
    for (LinearWeight& weight : linears)
      if (weight.interleaved) copies.push_back(&weight);
    if (lm_head_linear->interleaved) copies.push_back(&*lm_head_linear);
    if (copies.empty()) return;
    int64_t floats = 0;
    for (const LinearWeight* weight : copies) floats += weight->plain.numel();
    const at::Tensor buffer = huge_page_floats(floats);
    int64_t offset = 0;
    for (LinearWeight* weight : copies) {
      weight->interleave_into(buffer.narrow(0, offset, weight->plain.numel()));
      offset += weight->plain.numel();
    }
  }

  // x @ weight.plain.T: a few rows in few_rows_linear, into `out` (allocated on its first use: the step's
  // layers then share it, where a tensor for each product cost an allocation apiece, ~1 us); more through
  // oneDNN's packed weight where the eager layer would use it (layers/onednn_linear.py), from fewer rows for
  // long-rowed weights, else through at::mm on the plain weight, as F.linear calls it.
  at::Tensor linear(const at::Tensor& x, const LinearWeight& weight, const at::Tensor& packed_weight,
                    at::Tensor& out) const {
    const bool long_rows = weight.plain.size(1) > kShortRow;
    if (x.size(0) < (packed && long_rows ? kLongRowPackedMinRows : packed_min_rows)) {
      if (!out.defined()) out = at::empty({x.size(0), weight.plain.size(0)}, x.options());
      few_rows_linear(x, weight, out);
      return out;
    }
    if (!packed) return at::mm(x, weight.plain.t());
    // torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], ""), as layers/onednn_linear.py calls it.
    std::vector<c10::IValue> stack{x, packed_weight, c10::IValue(), std::string("none"),
                                   c10::List<std::optional<at::Scalar>>(), std::string("")};
    onednn_linear->callBoxed(stack);
    return stack[0].toTensor();
  }

  // residual += x (x is the residual itself on the first layer: then only copied), out = norm(residual).
  void add_norm(const at::Tensor& x, at::Tensor& residual, const at::Tensor& w, at::Tensor& out,
                bool first) const {
    const int64_t rows = x.size(0), n = x.size(1);
    const float* xs = x.data_ptr<float>();
    float* res = residual.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t r = 0; r < rows * n; ++r) res[r] = first ? xs[r] : xs[r] + res[r];
    for (int64_t r = 0; r < rows; ++r) rms_norm_row(res + r * n, w.data_ptr<float>(), o + r * n, n, eps);
  }

  // out = x * [cos | cos] + roll(x, half) * [-sin | sin]: each half of x turned by its partner in the other
  // half; a vector at a time where a half is whole vectors (every Qwen3's head_dim of 64 or 128 is).
  static void rotate(const float* x, const float* cos, const float* sin, float* out, int64_t half) {
    if (half % Vec::size() != 0) {
      for (int64_t d = 0; d < half; ++d) out[d] = x[d] * cos[d] + x[d + half] * sin[d];
      for (int64_t d = half; d < 2 * half; ++d) out[d] = x[d] * cos[d] + x[d - half] * sin[d];
      return;
    }
    for (int64_t d = 0; d < half; d += Vec::size()) {
      const Vec first = Vec::loadu(x + d), second = Vec::loadu(x + half + d);
      (first * Vec::loadu(cos + d) + second * Vec::loadu(sin + d)).store(out + d);
      (second * Vec::loadu(cos + half + d) + first * Vec::loadu(sin + half + d)).store(out + half + d);
    }
  }

  // The query and key heads of each token normalised (q_norm, k_norm) and rotated, the queries written to
  // q (tokens, heads, head_dim), the key and value rows stored in the token's cache slot: one pass over
  // the qkv rows, where the eager step takes a norm, two scalings, a roll, three products and two stores.
  void qk_norm_rotate_store(const at::Tensor& qkv, const at::Tensor* w, const at::Tensor& positions,
                            const at::Tensor& slot_mapping, at::Tensor& k_cache, at::Tensor& v_cache,
                            at::Tensor& q) const {
    const int64_t tokens = qkv.size(0), half = head_dim / 2, kv_row = kv_heads * head_dim;
    const float* rows = qkv.data_ptr<float>();
    const int64_t* pos = positions.data_ptr<int64_t>();
    const int64_t* slots = slot_mapping.data_ptr<int64_t>();
    const float* q_norm = w[kQNorm].data_ptr<float>();
    const float* k_norm = w[kKNorm].data_ptr<float>();
    float* k_out = k_cache.data_ptr<float>();
    float* v_out = v_cache.data_ptr<float>();
    float* q_out = q.data_ptr<float>();
    float normed[kMaxHeadDim];
    for (int64_t t = 0; t < tokens; ++t) {
      const float* row = rows + t * (heads + 2 * kv_heads) * head_dim;
      const float* cos = cos_sin.data_ptr<float>() + pos[t] * 2 * head_dim;  // [cos | cos]
      const float* sin = cos + head_dim;  // [-sin | sin]
      const int64_t slot = slots[t];
      for (int64_t h = 0; h < heads + kv_heads; ++h) {
        const bool is_query = h < heads;
        if (!is_query && slot < 0) continue;  // a padding row stores nothing
        rms_norm_row(row + h * head_dim, is_query ? q_norm : k_norm, normed, head_dim, eps);
        float* out = is_query ? q_out + (t * heads + h) * head_dim : k_out + slot * kv_row + (h - heads) * head_dim;
        rotate(normed, cos, sin, out, half);
      }
      if (slot >= 0) std::copy_n(row + (heads + kv_heads) * head_dim, kv_row, v_out + slot * kv_row);
    }
  }

  // act = silu(gate) * up for each row [gate | up] of gate_up, written to a tensor of its own so that the
  // down projection reads a contiguous input (oneDNN copies a strided one first). SiLU as ATen's vectorised
  // kernel computes it, x / (1 + exp(-x)), with the same vectorised exponential (SLEEF's, from libtorch).
  // Against at::silu_ on the gate's half and a loop for the product: the shipped model's three layers took
  // 9 -> 1.4 us a step at one sequence and 70 -> 28 us at 32 (a 2-core AMD EPYC, Zen 4, AVX-512).
  static void silu_and_multiply(const at::Tensor& gate_up, at::Tensor& act) {
    const int64_t rows = gate_up.size(0), inter = act.size(1);
    const float* gu = gate_up.data_ptr<float>();
    float* out = act.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r, gu += 2 * inter, out += inter)
      for (int64_t j = 0; j < inter; j += Vec::size()) {
        const Vec x = Vec::loadu(gu + j);
        (x / (Vec(1.f) + x.neg().exp()) * Vec::loadu(gu + inter + j)).store(out + j);
      }
  }

  // The step's logits, (tokens, vocab).
  at::Tensor compute_logits(const at::Tensor& input_ids, const at::Tensor& positions, const at::Tensor& slot_mapping,
                            const at::Tensor& block_tables, const at::Tensor& context_lens) {
    TORCH_CHECK(input_ids.scalar_type() == at::kLong && positions.scalar_type() == at::kLong &&
                    slot_mapping.scalar_type() == at::kLong && input_ids.is_contiguous() &&
                    positions.is_contiguous() && slot_mapping.is_contiguous(),
                "expected contiguous int64 token ids, positions and slots");
    const int64_t tokens = input_ids.size(0), hidden_size = embed.size(1);
    const auto options = embed.options();
    // The residual stream starts as each token's embedding row.
    at::Tensor hidden = at::empty({tokens, hidden_size}, options);
    for (int64_t t = 0; t < tokens; ++t)
      std::copy_n(embed.data_ptr<float>() + input_ids.data_ptr<int64_t>()[t] * hidden_size, hidden_size,
                  hidden.data_ptr<float>() + t * hidden_size);
    at::Tensor residual = at::empty_like(hidden), normed = at::empty_like(hidden);
    at::Tensor q = at::empty({tokens, heads, head_dim}, options);
    at::Tensor act = at::empty({tokens, layers[kDown].size(1)}, options);  // each layer's silu(gate) * up
    at::Tensor qkv_out, o_out, gate_up_out, down_out, logits_out;  // the few-row products' (linear)
    for (size_t i = 0; i < k_caches.size(); ++i) {
      const at::Tensor* w = &layers[i * kPerLayer];
      const LinearWeight* lin = &linears[i * std::size(kLinears)];  // qkv, o, gate_up, down (kLinears)
      add_norm(hidden, residual, w[kInputNorm], normed, i == 0);
      const at::Tensor qkv = linear(normed, lin[0], w[kQkvPacked], qkv_out);
      qk_norm_rotate_store(qkv, w, positions, slot_mapping, k_caches[i], v_caches[i], q);
      const at::Tensor out = attention.call(q, k_caches[i], v_caches[i], block_tables, context_lens, scale);
      hidden = linear(out.view({tokens, heads * head_dim}), lin[1], w[kOProjPacked], o_out);
      add_norm(hidden, residual, w[kPostNorm], normed, false);
      const at::Tensor gate_up = linear(normed, lin[2], w[kGateUpPacked], gate_up_out);
      silu_and_multiply(gate_up, act);
      hidden = linear(act, lin[3], w[kDownPacked], down_out);
    }
    add_norm(hidden, residual, final_norm, normed, false);
    return linear(normed, *lm_head_linear, lm_head_packed, logits_out);
  }

  // Each row's most likely token id, as torch.argmax picks it (the first of equals; NaN wins), as a list for
  // Python: the sampler would take the same argmax of the same logits.
  std::vector<int64_t> greedy_token_ids(const at::Tensor& input_ids, const at::Tensor& positions,
                                        const at::Tensor& slot_mapping, const at::Tensor& block_tables,
                                        const at::Tensor& context_lens) {
    const at::Tensor logits = compute_logits(input_ids, positions, slot_mapping, block_tables, context_lens);
    const int64_t vocab = logits.size(1);
    std::vector<int64_t> ids(logits.size(0));
    for (size_t r = 0; r < ids.size(); ++r) {
      const float* row = logits.data_ptr<float>() + r * vocab;
      int64_t best = 0;
      for (int64_t v = 1; v < vocab; ++v)
        if (row[v] > row[best] || (std::isnan(row[v]) && !std::isnan(row[best]))) best = v;
      ids[r] = best;
    }
    return ids;
  }
};

}  // namespace

// A Python module (pybind11), not a TorchScript class: a call costs ~1.5 us instead of ~4, and the greedy ids
// come back as a list with no tensor to convert. The GIL is released while a step runs, as torch's own operators
// release it, so that a server's other threads go on (a step of a real checkpoint takes ~100 ms).
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  pybind11::class_<DecodeStep>(m, "DecodeStep")
      .def(pybind11::init<std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>, at::Tensor,
                          at::Tensor, at::Tensor, at::Tensor, at::Tensor, int64_t, int64_t, int64_t, int64_t, double,
                          double, bool>())
      .def("compute_logits", &DecodeStep::compute_logits, pybind11::call_guard<pybind11::gil_scoped_release>())
      .def("greedy_token_ids", &DecodeStep::greedy_token_ids, pybind11::call_guard<pybind11::gil_scoped_release>());
}
