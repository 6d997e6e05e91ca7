"""Execution layer: an opt-in decode step compiled with ``torch.compile`` (inductor).

The eager decode step dispatches a few hundred small operations; inductor traces the step once and fuses
the element-wise ones (norms, rotary, SiLU, residual adds, the K/V store) into a handful of generated
kernels around the matrix multiplies. Three choices make that work for a paged KV cache:

- the attention is not compiled. It runs the model's own backend's decode (``cpp``: the C++ kernel;
  ``torch``: the step's ``DecodePlan``, its length groups and gather buffers), wrapped as the custom
  operator ``paged_decode_attention``, which inductor calls as it is, as vLLM keeps attention out of its
  compiled graphs. Everything that reads the step's ``Context`` (block tables, context lengths, each
  group's longest context) happens inside it, at run time, so the graph itself has none;
- the batch size (and the number of cache slots) are marked dynamic: one compiled graph serves every batch
  size and context length, with no padding to buckets (a batch of one sequence is a shape of its own and
  compiles once more). Only those: with every size symbolic (``dynamic=True``), a batch of 2 would be
  taken for the model's 2 KV heads and compiled for that one batch size;
- each layer's cache goes in as a flat ``(slots, kv_heads, head_dim)`` view *argument*, and the step writes
  its new K/V rows into it with ``index_copy_``, which inductor turns into an in-place write. Written
  through a view taken inside the graph, the cache would be copied whole every step to keep the write
  functional.

A model whose linear layers are packed for oneDNN (``layers/onednn_linear.py``) keeps its packed matrix
multiplies in the compiled step: each is the custom operator ``onednn_linear``, called as it is, as the
attention is.

The compiled step runs the model's own modules with the model's own weights, so greedy tokens equal the
eager step's. Compilation happens on the first call and takes seconds to tens of seconds
(``compile_seconds``); ``compile_at_startup`` makes those calls on stand-in steps, with a progress bar,
before the engine serves anything. Emits no events: the model runner reports the compile time
(DECODE_COMPILE).
"""

from __future__ import annotations

from time import perf_counter

import torch
from tqdm.auto import tqdm

from nanovllm_teach.layers.attention import Attention, AttentionBackend, make_attention_backend
from nanovllm_teach.models.qwen3 import Qwen3ForCausalLM
from nanovllm_teach.utils.context import Context, get_context, reset_context, set_context

# The graph names its backend, a string; the operator keeps one instance of each backend it was asked for.
_BACKENDS: dict[str, AttentionBackend] = {}


@torch.library.custom_op("nanovllm_teach::paged_decode_attention", mutates_args=())
def paged_decode_attention(q: torch.Tensor, k_rows: torch.Tensor, v_rows: torch.Tensor, block_size: int,
                           scale: float, backend: str) -> torch.Tensor:
    """The decode attention of the backend called ``backend`` for the step's ``Context`` (read as every
    attention layer reads it). ``k_rows``, ``v_rows``: one layer's cache, flat, (slots, kv_heads, head_dim)."""
    if backend not in _BACKENDS:
        _BACKENDS[backend] = make_attention_backend(backend)
    k_cache = k_rows.view(-1, block_size, *k_rows.shape[1:])
    v_cache = v_rows.view(-1, block_size, *v_rows.shape[1:])
    return _BACKENDS[backend].decode(q, k_cache, v_cache, get_context(), scale)


@paged_decode_attention.register_fake
def _(q, k_rows, v_rows, block_size, scale, backend):
    return q.new_empty(q.shape)


def _decode_forward(model: Qwen3ForCausalLM, input_ids: torch.Tensor, positions: torch.Tensor,
                    slot_mapping: torch.Tensor, k_rows: list[torch.Tensor], v_rows: list[torch.Tensor],
                    block_size: int, backend: str) -> torch.Tensor:
    """One decode step of ``model`` with the cache passed in, through the model's own modules."""
    body = model.model
    hidden = body.embed_tokens(input_ids)
    rope = body.rotary_emb(positions)
    residual = None
    for layer, k_cache, v_cache in zip(body.layers, k_rows, v_rows):
        hidden, residual = (layer.input_layernorm(hidden), hidden) if residual is None else \
            layer.input_layernorm(hidden, residual)
        attn = layer.self_attn
        q, k, v = attn.project(rope, hidden)
        k_cache.index_copy_(0, slot_mapping, k)
        v_cache.index_copy_(0, slot_mapping, v)
        out = paged_decode_attention(q, k_cache, v_cache, block_size, attn.attn.scale, backend)
        hidden = attn.o_proj(out.flatten(1, -1))
        hidden, residual = layer.post_attention_layernorm(hidden, residual)
        hidden = layer.mlp(hidden)
    hidden, _ = body.norm(hidden, residual)
    return hidden


class CompiledDecode:
    """``model``'s decode step, compiled once and reused for every batch: call it where the eager step
    ``model(input_ids, positions)`` runs, after the step's ``Context`` is set. The KV cache must be bound,
    and every sequence must have a slot (no -1 rows: the torch backend never pads a decode batch)."""

    def __init__(self, model: Qwen3ForCausalLM) -> None:
        self.model = model
        self.layers = [m for m in model.modules() if isinstance(m, Attention)]
        self.compile_seconds: float | None = None  # set by the first call, which compiles
        self._compiled = torch.compile(_decode_forward, fullgraph=True)

    def __call__(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        ctx = get_context()
        assert not ctx.is_prefill and all(layer.k_cache.numel() for layer in self.layers)
        k_rows = [layer.k_cache.flatten(0, 1) for layer in self.layers]
        v_rows = [layer.v_cache.flatten(0, 1) for layer in self.layers]
        for tensor in (input_ids, positions, ctx.slot_mapping):
            torch._dynamo.maybe_mark_dynamic(tensor, 0)
        for rows in k_rows + v_rows:
            torch._dynamo.maybe_mark_dynamic(rows, 0)
        start = perf_counter()
        hidden = self._compiled(self.model, input_ids, positions, ctx.slot_mapping, k_rows, v_rows,
                                self.layers[0].k_cache.size(1), self.layers[0].backend.name)
        if self.compile_seconds is None:
            self.compile_seconds = perf_counter() - start
        return hidden

    def compile_at_startup(self, batch_sizes: list[int], device: torch.device) -> float:
        """Compile by running one stand-in decode step per batch size (2 before 1: the dynamic graph first,
        then the batch of one, a shape of its own); returns the seconds it took. Every row stores into slot
        0 and reads it back (a valid slot whatever the block size): whichever sequence gets block 0 writes
        that row again before anything reads it."""
        start = perf_counter()
        with torch.inference_mode():
            for bs in tqdm(batch_sizes, desc="torch.compile of the decode step", unit="batch size"):
                # Three tensors, not one: the compiled graph must not be specialised to aliased inputs.
                ids, pos, slots = (torch.zeros(bs, dtype=torch.int64, device=device) for _ in range(3))
                set_context(Context(is_prefill=False, slot_mapping=slots,
                                    context_lens=torch.ones(bs, dtype=torch.int32, device=device),
                                    block_tables=torch.zeros(bs, 1, dtype=torch.int32, device=device)))
                try:
                    self(ids, pos)
                finally:
                    reset_context()
        return perf_counter() - start
