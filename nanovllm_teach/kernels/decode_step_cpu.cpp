// Execution layer: the whole decode forward of Qwen3 on a CPU as one native call — the CPU's counterpart of a
// CUDA graph (engine/compiled_decode.py builds this file, loads it and calls it for every decode step).
//
// Why: the shipped model's decode step is ~70 small tensor operations (per layer: two norms, three or four
// multiplies, the query/key norms, the rotation, the K/V store, the attention, the gate). Issued from Python,
// each pays the interpreter and torch's Python binding, a few microseconds apiece: together several times the
// arithmetic. A CUDA graph removes that cost on a GPU by recording the kernel launches once and replaying
// them; here the same list of operations is written out in C++ once and compiled, so a step is one call
// from Python and each operation a direct ATen call.
//
// The operations are the eager step's own, in the same order, on the same weights (the oneDNN-packed ones
// when the model has them, through the same operator), and the attention is the "cpp" backend's kernel
// (kernels/paged_decode_cpu.cpp, found through the dispatcher): the logits are bitwise the eager step's.
// The step ends with the LM head, and, when every row is greedy, with the argmax: a greedy step returns its
// token ids and nothing of it runs in Python but the call. Emits no events.

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/custom_class.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <vector>

namespace {

// The tensors of one decoder layer, in the order Python hands them over (engine/compiled_decode.py): the
// four linears' weights twice, plain and packed (the same tensor when the model has no packed weights).
constexpr int64_t kPerLayer = 12;
enum Weight { kInputNorm, kQkv, kQNorm, kKNorm, kOProj, kPostNorm, kGateUp, kDown,
              kQkvPacked, kOProjPacked, kGateUpPacked, kDownPacked };

struct DecodeStep : torch::CustomClassHolder {
  std::vector<at::Tensor> layers;  // kPerLayer per layer
  std::vector<at::Tensor> k_caches, v_caches;  // each (blocks, block_size, kv_heads, head_dim)
  at::Tensor embed, final_norm, cos_sin;  // cos_sin: (positions, 2, head_dim), RotaryEmbedding's table
  at::Tensor lm_head, lm_head_packed;  // the LM head's weight, plain and packed (or plain again)
  int64_t heads, kv_heads, head_dim;
  int64_t packed_min_rows;  // fewer rows multiply through at::linear (layers/onednn_linear.py's PACKED_MIN_ROWS)
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
  }

  // x @ plain.T, through oneDNN's packed weight where the eager layer would use it (layers/onednn_linear.py).
  at::Tensor linear(const at::Tensor& x, const at::Tensor& plain, const at::Tensor& w) const {
    if (!packed || x.size(0) < packed_min_rows) return at::linear(x, plain);
    // torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], ""), as layers/onednn_linear.py calls it.
    std::vector<c10::IValue> stack{x, w, c10::IValue(), std::string("none"),
                                   c10::List<std::optional<at::Scalar>>(), std::string("")};
    onednn_linear->callBoxed(stack);
    return stack[0].toTensor();
  }

  at::Tensor norm(const at::Tensor& x, const at::Tensor& w) const {
    return at::rms_norm(x, {w.size(0)}, w, eps);
  }

  // The step's logits, (tokens, vocab); with `greedy`, each row's most likely token id instead.
  at::Tensor forward(const at::Tensor& input_ids, const at::Tensor& positions, const at::Tensor& slot_mapping,
                     const at::Tensor& block_tables, const at::Tensor& context_lens, bool greedy) {
    const int64_t tokens = input_ids.size(0);
    at::Tensor hidden = at::embedding(embed, input_ids);
    // Every layer rotates by the same angles: each token's (cos, sin) rows, (tokens, 1, head_dim) each.
    const at::Tensor rows = at::index_select(cos_sin, 0, positions).unsqueeze(2);
    const at::Tensor cos = rows.select(1, 0), sin = rows.select(1, 1);
    at::Tensor residual;
    for (size_t i = 0; i < k_caches.size(); ++i) {
      const at::Tensor* w = &layers[i * kPerLayer];
      if (!residual.defined()) {
        residual = hidden;
        hidden = norm(hidden, w[kInputNorm]);
      } else {
        residual = hidden + residual;
        hidden = norm(residual, w[kInputNorm]);
      }
      // Queries, keys, values; the query and key heads normalised together, then rotated together.
      const at::Tensor qkv = linear(hidden, w[kQkv], w[kQkvPacked]).view({-1, heads + 2 * kv_heads, head_dim});
      const auto qk_v = qkv.split_with_sizes({heads + kv_heads, kv_heads}, 1);
      at::Tensor qk = at::rms_norm(qk_v[0], {head_dim}, std::nullopt, eps);
      qk.narrow(1, 0, heads).mul_(w[kQNorm]);
      qk.narrow(1, heads, kv_heads).mul_(w[kKNorm]);
      qk = qk * cos + qk.roll({head_dim / 2}, {-1}) * sin;
      const auto q_k = qk.split_with_sizes({heads, kv_heads}, 1);
      // Store this step's K/V rows in their slots, then attend over each sequence's cache.
      k_caches[i].view({-1, kv_heads, head_dim}).index_copy_(0, slot_mapping, q_k[1]);
      v_caches[i].view({-1, kv_heads, head_dim}).index_copy_(0, slot_mapping, qk_v[1]);
      const at::Tensor out =
          attention.call(q_k[0].contiguous(), k_caches[i], v_caches[i], block_tables, context_lens, scale);
      hidden = linear(out.view({tokens, heads * head_dim}), w[kOProj], w[kOProjPacked]);
      residual = hidden + residual;
      hidden = norm(residual, w[kPostNorm]);
      const auto gate_up = linear(hidden, w[kGateUp], w[kGateUpPacked]).chunk(2, -1);
      hidden = linear(at::silu(gate_up[0]) * gate_up[1], w[kDown], w[kDownPacked]);
    }
    const at::Tensor logits = linear(norm(hidden + residual, final_norm), lm_head, lm_head_packed);
    return greedy ? logits.argmax(-1) : logits;
  }
};

}  // namespace

TORCH_LIBRARY(nanovllm_teach_decode, m) {
  m.class_<DecodeStep>("DecodeStep")
      .def(torch::init<std::vector<at::Tensor>, std::vector<at::Tensor>, std::vector<at::Tensor>, at::Tensor,
                       at::Tensor, at::Tensor, at::Tensor, at::Tensor, int64_t, int64_t, int64_t, int64_t, double,
                       double, bool>())
      .def("forward", &DecodeStep::forward);
}
