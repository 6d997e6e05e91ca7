"""Execution layer: the decode step compiled ahead of time into native code, the CPU's counterpart of a CUDA graph.

A decode step of a small model costs more in dispatch than in arithmetic: the shipped model's step is ~70
tensor operations, each issued from Python through torch's binding. On a GPU the engine records the step's
kernel launches once in a CUDA graph and replays them (``engine/cuda_graphs.py``). On a CPU the same idea
takes another form: the list of operations is written out once in C++ (``kernels/decode_step_cpu.cpp``),
compiled once per machine, and a decode step becomes one call into it, with each operation a direct ATen
call and no Python between the layers. As with a CUDA graph:

- the weights and the KV cache are bound once, when the step is built (after the cache is allocated: a
  graph bakes in the cache's addresses, this step holds the cache tensors); a weight with short rows, as the
  shipped model's, is copied once for the step's own loop, into 2 MB memory pages where Linux gives them;
- each step passes only its inputs (token ids, positions, slots, block tables, context lengths), and every
  batch size and context length runs the same code: nothing to capture per batch size;
- the step runs to the logits (the LM head included) and, when every row is greedy, to the token ids (the
  argmax): a greedy step costs Python one call;
- the result equals the eager step's to rounding: from 16 rows the multiplies are the eager layers'
  (oneDNN's packed multiply, ``layers/onednn_linear.py``, or ``F.linear``'s ``at::mm`` where the weights
  are not packed; oneDNN from 4 rows for a weight whose rows are too long to stay in the cache, as every
  real Qwen3's), the attention is the ``cpp`` backend's kernel,
  and the rest is loops of its own in ATen's vector type: the multiplies of fewer rows (matrix-vector
  products, eight outputs at a time: faster than ``F.linear``'s BLAS call there), norms, rotation, K/V
  store, gate, argmax. They add in another order than ATen's operators (~1e-6 relative) and cost far less
  than ~60 ATen calls. The greedy tokens are identical (tests check them against the eager step and
  against transformers).

It is built the first time a machine needs it, as a Python extension module (pybind11: a call costs less
than a TorchScript class's), with PyTorch's C++ extension loader (a compiler must be installed; ~30 s, a
line says so), cached like the C++ attention kernel (``layers/attention_cpp.py``:
keyed by the source, the flags, the processor, Python and torch), and later starts only load the library.
The model runner uses it for every decode step where it can run (``unusable_reason`` is None: a CPU, one
rank, float32, the ``cpp`` attention backend, Qwen3 without attention biases, ``enforce_eager`` off), and
runs eagerly otherwise. Emits no events: ``engine/decode_paths.py`` reports the build or load time
(DECODE_COMPILE).
"""

from __future__ import annotations

import functools
import importlib
from pathlib import Path

import torch

from nanovllm_teach.layers.attention import Attention
from nanovllm_teach.i18n import Text
from nanovllm_teach.layers.attention_cpp import WIDTH_MULTIPLE, cpp_unusable_reason, load_native_library, said
from nanovllm_teach.layers.onednn_linear import PACKED_MIN_ROWS
from nanovllm_teach.models.qwen3 import Qwen3ForCausalLM
from nanovllm_teach.utils.context import get_context

SOURCE = Path(__file__).resolve().parent.parent / "kernels" / "decode_step_cpu.cpp"
LIBRARY_NAME = "nanovllm_teach_decode"
NATIVE_STEP = Text(en="the native decode step", zh="原生解码步")


@functools.cache
def _load() -> str | None:
    """Build (once per machine) and load the native decode step, and the attention kernel it calls first;
    None when both worked, else why not."""
    return cpp_unusable_reason(torch.device("cpu"), torch.float32) or \
        said(load_native_library(SOURCE, LIBRARY_NAME, NATIVE_STEP, python_module=True))


def unusable_reason(device: torch.device, world_size: int, dtype: torch.dtype, attention_backend: str,
                    enforce_eager: bool, attention_bias: bool, widths: dict[str, int] | None = None) -> str | None:
    """Why decode steps cannot run as native code here (None when they can). ``widths``: the model's
    ``hidden_size`` and ``intermediate_size``, which the step's loops take in whole vectors. Builds the
    library on the first call that gets that far: that is the only way to know the compiler works."""
    if enforce_eager:
        return "enforce_eager is set"
    if device.type != "cpu":
        return f"the native decode step runs on a CPU, not on {device.type} (a GPU replays CUDA graphs)"
    if world_size > 1:
        return "tensor parallelism: the native decode step has no all-reduce"
    if dtype != torch.float32:
        return f"the native decode step computes in float32, not {str(dtype).removeprefix('torch.')}"
    if attention_backend != "cpp":
        return f"the native decode step attends with the cpp kernel, not the {attention_backend} backend"
    if attention_bias:
        return "the native decode step has no attention biases (Qwen3 has none)"
    for name, width in (widths or {}).items():
        if width % WIDTH_MULTIPLE:
            return (f"the native decode step works in whole vectors: {name} {width} is not a multiple of "
                    f"{WIDTH_MULTIPLE}")
    return _load()


class CompiledDecode:
    """``model``'s decode step as one native call: call it where the eager step ``model.compute_logits(
    model(input_ids, positions))`` runs, after the step's ``Context`` is set. Build it once the KV cache is
    bound."""

    def __init__(self, model: Qwen3ForCausalLM) -> None:
        # Built only where unusable_reason found nothing in the way (decode_paths.py), so the library loads.
        problem = _load()
        assert problem is None, f"the native decode step cannot run: {problem}"
        body = model.model
        layers = [m for m in model.modules() if isinstance(m, Attention)]
        assert all(layer.k_cache.numel() for layer in layers), "bind the KV cache first"
        packed = body.layers[0].self_attn.qkv_proj.packed_weight is not None

        def packed_weight(linear: torch.nn.Module) -> torch.Tensor:
            return linear.packed_weight if packed else linear.weight

        tensors = []
        for layer in body.layers:
            attn, mlp = layer.self_attn, layer.mlp
            linears = (attn.qkv_proj, attn.o_proj, mlp.gate_up_proj, mlp.down_proj)
            tensors += [layer.input_layernorm.weight, attn.qkv_proj.weight, attn.q_norm.weight, attn.k_norm.weight,
                        attn.o_proj.weight, layer.post_attention_layernorm.weight, mlp.gate_up_proj.weight,
                        mlp.down_proj.weight, *(packed_weight(linear) for linear in linears)]
        first = body.layers[0].self_attn
        self.step = importlib.import_module(LIBRARY_NAME).DecodeStep(
            tensors, [layer.k_cache for layer in layers], [layer.v_cache for layer in layers],
            body.embed_tokens.weight, body.norm.weight, body.rotary_emb.cos_sin_cache, model.lm_head.weight,
            packed_weight(model.lm_head), first.num_heads, first.num_kv_heads, first.head_dim, PACKED_MIN_ROWS,
            body.norm.eps, first.attn.scale, packed)

    def __call__(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """The step's logits, (tokens, vocab)."""
        ctx = get_context()
        return self.step.compute_logits(input_ids, positions, ctx.slot_mapping, ctx.block_tables, ctx.context_lens)

    def greedy_token_ids(self, input_ids: torch.Tensor, positions: torch.Tensor) -> list[int]:
        """Each row's most likely token id (the argmax of the logits ``__call__`` returns), computed natively."""
        ctx = get_context()
        return self.step.greedy_token_ids(input_ids, positions, ctx.slot_mapping, ctx.block_tables,
                                          ctx.context_lens)
