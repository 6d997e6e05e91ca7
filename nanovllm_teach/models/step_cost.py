"""Execution layer (measurement only): what one decode step costs, and how close it is to the machine's limit.

A decode step of B sequences at context L does two kinds of work:

- matrix multiplies against every weight (2 FLOPs per weight per token) and attention over the cache
  (4 FLOPs per head, per head dimension, per cached token, per sequence);
- memory traffic: every weight is read once per step, and every cached K/V row once per layer.

Dividing by the step's time gives GFLOP/s and GB/s; dividing those by what the machine can do
(``matmul_peak_gflops``, ``memory_bandwidth_gbs``, both measured here, on this machine) says how far from its
limit the step is: a small CPU roofline. ``count_ops`` counts the aten operations a step dispatches, the
other cost of a small model, which no roofline shows.

Used by ``benchmarks/bench_cpu.py`` and the decode-performance notebook; the engine never imports it, and it
emits no events.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass
from time import perf_counter
from typing import Callable

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from nanovllm_teach.layers.attention import Attention
from nanovllm_teach.layers.onednn_linear import auto_linear_backend, linear, pack
from nanovllm_teach.utils.context import Context, reset_context, set_context
from nanovllm_teach.utils.kv_slots import token_slot


@dataclass
class DecodeBatch:
    """One decode step's inputs, with a KV cache of random rows bound to the model's attention layers."""

    input_ids: torch.Tensor
    positions: torch.Tensor
    context: Context
    kv_cache: torch.Tensor


def make_decode_batch(model: nn.Module, context_lens: list[int], block_size: int = 256,
                      seed: int = 0) -> DecodeBatch:
    """A decode step for ``len(context_lens)`` sequences whose contexts (the new token included) have these
    lengths; each sequence owns consecutive blocks of a cache just big enough. Binds the cache to ``model``."""
    gen = torch.Generator().manual_seed(seed)
    layers = [m for m in model.modules() if isinstance(m, Attention)]
    dtype = next(model.parameters()).dtype
    blocks = [-(-n // block_size) for n in context_lens]
    kv_cache = torch.randn(2, len(layers), sum(blocks), block_size, layers[0].num_kv_heads, layers[0].head_dim,
                           generator=gen).to(dtype)
    for i, layer in enumerate(layers):
        layer.k_cache, layer.v_cache = kv_cache[0, i], kv_cache[1, i]
    width, first, tables = max(blocks), 0, []
    for n in blocks:
        tables.append(list(range(first, first + n)) + [-1] * (width - n))
        first += n
    block_tables = torch.tensor(tables, dtype=torch.int32)
    slots = [token_slot(table, n - 1, block_size) for table, n in zip(tables, context_lens)]
    vocab = model.lm_head.weight.size(0)
    return DecodeBatch(
        input_ids=torch.randint(0, vocab, (len(context_lens),), generator=gen),
        positions=torch.tensor([n - 1 for n in context_lens]),
        context=Context(is_prefill=False, slot_mapping=torch.tensor(slots),
                        context_lens=torch.tensor(context_lens, dtype=torch.int32), block_tables=block_tables),
        kv_cache=kv_cache)


def decode_step(model: nn.Module, batch: DecodeBatch, forward: Callable | None = None) -> torch.Tensor:
    """Run one decode step: the logits, from ``forward(input_ids, positions)`` (the native step's
    ``CompiledDecode``, which ends with the LM head) or, by default, the model's own forward and LM head.
    A fresh copy of the Context each time, so nothing one step derived from it is reused by the next."""
    set_context(Context(**{name: getattr(batch.context, name) for name in (
        "is_prefill", "slot_mapping", "context_lens", "block_tables")}))
    try:
        with torch.inference_mode():
            if forward is not None:
                return forward(batch.input_ids, batch.positions)
            return model.compute_logits(model(batch.input_ids, batch.positions))
    finally:
        reset_context()


def time_it(fn: Callable[[], object], repeats: int = 20, warmup: int = 3) -> float:
    """Median wall seconds of ``fn()``."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = perf_counter()
        fn()
        times.append(perf_counter() - start)
    return statistics.median(times)


class _CountOps(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))


# Operations that only relabel a tensor's memory (no kernel runs): counted apart from the real work.
VIEW_OPS = frozenset({"view", "unsqueeze", "squeeze", "transpose", "chunk", "split", "split_with_sizes",
                      "flatten", "expand", "reshape", "slice", "select", "alias", "t", "permute", "detach",
                      "_unsafe_view", "as_strided", "lift_fresh"})


def count_ops(fn: Callable[[], object]) -> tuple[int, int, Counter[str]]:
    """The aten operations ``fn()`` dispatches: (all of them, those that are not views, count by name)."""
    with _CountOps() as counter:
        fn()
    work = sum(n for name, n in counter.ops.items() if name not in VIEW_OPS)
    return sum(counter.ops.values()), work, counter.ops


def decode_flops(model: nn.Module, context_lens: list[int]) -> float:
    """FLOPs of one decode step: every weight matrix once per sequence, plus attention over each context."""
    cfg = _shape(model)
    matmul_weights = sum(p.numel() for name, p in model.named_parameters()
                         if p.dim() == 2 and "embed_tokens" not in name)
    if model.lm_head.weight is model.model.embed_tokens.weight:
        matmul_weights += model.lm_head.weight.numel()  # tied: the LM head's matmul still happens
    attention = 4 * cfg["layers"] * cfg["heads"] * cfg["head_dim"] * sum(context_lens)
    return 2.0 * matmul_weights * len(context_lens) + attention


def decode_bytes(model: nn.Module, context_lens: list[int]) -> float:
    """Bytes one decode step must read at least: every weight once, every cached K and V row once per layer."""
    cfg = _shape(model)
    elem = next(model.parameters()).element_size()
    weights = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values()
                  if p.dim() == 2) * elem
    kv = 2 * cfg["layers"] * cfg["kv_heads"] * cfg["head_dim"] * sum(context_lens) * elem
    return float(weights + kv)


def _shape(model: nn.Module) -> dict[str, int]:
    layers = [m for m in model.modules() if isinstance(m, Attention)]
    return dict(layers=len(layers), heads=layers[0].num_heads, kv_heads=layers[0].num_kv_heads,
                head_dim=layers[0].head_dim)


def matmul_peak_gflops(linear_backend: str | None = None, n: int = 1024, repeats: int = 5) -> float:
    """This machine's float32 matrix-multiply speed on the current threads, an n x n x n product through the
    library the linear layers use: ``linear_backend`` ``"torch"`` (``F.linear``, the BLAS PyTorch was built
    with) or ``"onednn"`` (a packed weight); None: the one ``linear_backend="auto"`` picks on this CPU. The
    two can differ by 2x on one machine (``layers/onednn_linear.py``)."""
    linear_backend = linear_backend or auto_linear_backend(torch.device("cpu"), torch.float32)
    x, weight = torch.randn(n, n), torch.randn(n, n)
    packed = pack(weight) if linear_backend == "onednn" else None
    return 2 * n ** 3 / time_it(lambda: linear(x, weight, None, packed), repeats=repeats, warmup=1) / 1e9


def memory_bandwidth_gbs(mib: int = 256, repeats: int = 5) -> float:
    """This machine's memory bandwidth: a copy of ``mib`` MiB (far larger than any cache) reads and writes it."""
    src = torch.empty(mib * 2**20 // 4)
    src.fill_(1.0)
    dst = torch.empty_like(src)
    return 2 * src.numel() * 4 / time_it(lambda: dst.copy_(src), repeats=repeats, warmup=1) / 1e9
