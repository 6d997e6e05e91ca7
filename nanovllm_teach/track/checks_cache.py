"""``build check``'s checks of chapters 6 and 7: the learner's KV cache functions against the engine's paged
attention, on the same keys and values.

Role: teaching (the track). Emits no events.

Every case is a decode step of a batch of sequences of different lengths, with grouped-query heads (4 query
heads, 2 K/V heads): each sequence's keys and values are random rows, stored by the engine's own
``store_kvcache`` into a paged cache whose blocks are handed out in shuffled order, the way a busy engine's
are. The engine's ``decode`` over that cache is what a decode of the same rows must give, contiguous
(chapter 6) or paged (chapter 7); the part of every cache that no sequence wrote holds large random values,
so a decode that reads past a sequence's own keys is seen. Three steps follow one another (each sequence one
token longer), and one batch is long enough for the engine to attend in groups. Tolerances: 1e-4 relative
and 1e-5 absolute for attention, exact for what a store writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import torch

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.layers.attention_torch import TorchAttentionBackend
from nanovllm_teach.track.compare import called, first_difference
from nanovllm_teach.track.seams import Seam
from nanovllm_teach.utils.context import Context, reset_context, set_context

RTOL, ATOL = 1e-4, 1e-5
HEADS, KV_HEADS, HEAD_DIM, BLOCK_SIZE, SCALE = 4, 2, 16, 4, 0.25
BATCHES = ([5, 1, 12], [3, 9, 17, 2, 8, 30, 4, 11, 6, 21])  # prompt lengths; the second batch is attended in groups
STEPS = 3

DECODE_STEP = Text(en="decode step {step} of {count} sequences of {lengths} tokens",
                   zh="{count} 条长度为 {lengths} 的序列的第 {step} 个解码 step")
PREFIX_CACHED = Text(en="a prefill of {count} tokens whose first {cached} are cached already (slot -1)",
                     zh="一次 {count} 个 token 的预填充，其中前 {cached} 个已经缓存（槽位 -1）")
RETURNED = Text(en="your {name} on {case} returned {type}: it writes the cache in place and returns None",
                zh="你的 {name} 在{case}上返回了 {type}：它应当原地写缓存并返回 None")


@dataclass
class Step:
    """One decode step: every sequence's rows so far (its new token's last), in a paged cache and its query."""

    case: str
    lengths: list[int]  # each sequence's keys, the new token's included
    keys: list[torch.Tensor]  # (length, kv_heads, head_dim) per sequence
    values: list[torch.Tensor]
    q: torch.Tensor  # (batch, heads, head_dim)
    k_cache: torch.Tensor  # (num_blocks, block_size, kv_heads, head_dim), paged
    v_cache: torch.Tensor
    block_tables: torch.Tensor  # (batch, width) int32, -1 past each sequence's last block

    def context(self) -> Context:
        """A fresh step's ``Context`` (the engine's decode keeps what it derives from one on it)."""
        return Context(context_lens=torch.tensor(self.lengths, dtype=torch.int32), block_tables=self.block_tables)

    def contiguous(self, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """The same rows, sequence i in row i of a contiguous cache; the unused tail random and large."""
        shape = (len(self.lengths), max(self.lengths) + 3, KV_HEADS, HEAD_DIM)
        k_cache, v_cache = torch.randn(shape, generator=g) * 100, torch.randn(shape, generator=g) * 100
        for i, length in enumerate(self.lengths):
            k_cache[i, :length], v_cache[i, :length] = self.keys[i], self.values[i]
        return k_cache, v_cache


def decode_steps(seed: int = 0) -> list[Step]:
    """``STEPS`` decode steps of each batch of ``BATCHES``, the rows stored by the engine's ``store_kvcache``."""
    g = torch.Generator().manual_seed(seed)
    engine = TorchAttentionBackend()
    steps = []
    for prompts in BATCHES:
        final = [n + STEPS for n in prompts]
        widths = [-(-n // BLOCK_SIZE) for n in final]
        num_blocks = sum(widths) + 2
        order = torch.randperm(num_blocks, generator=g).tolist()
        tables = [order[sum(widths[:i]):sum(widths[:i + 1])] for i in range(len(final))]
        block_tables = torch.tensor([t + [-1] * (max(widths) - len(t)) for t in tables], dtype=torch.int32)
        keys = [torch.randn(n, KV_HEADS, HEAD_DIM, generator=g) for n in final]
        values = [torch.randn(n, KV_HEADS, HEAD_DIM, generator=g) for n in final]
        for step in range(1, STEPS + 1):
            lengths = [n + step for n in prompts]
            shape = (num_blocks, BLOCK_SIZE, KV_HEADS, HEAD_DIM)
            k_cache, v_cache = torch.randn(shape, generator=g) * 100, torch.randn(shape, generator=g) * 100
            slots = torch.tensor([tables[i][j // BLOCK_SIZE] * BLOCK_SIZE + j % BLOCK_SIZE
                                  for i, n in enumerate(lengths) for j in range(n)])
            reset_context()
            engine.store_kvcache(torch.cat([k[:n] for k, n in zip(keys, lengths)]),
                                 torch.cat([v[:n] for v, n in zip(values, lengths)]), k_cache, v_cache, slots)
            case = say(DECODE_STEP, step=step, count=len(lengths), lengths=lengths)
            steps.append(Step(case, lengths, [k[:n] for k, n in zip(keys, lengths)],
                              [v[:n] for v, n in zip(values, lengths)], torch.randn(len(lengths), HEADS, HEAD_DIM,
                                                                                    generator=g),
                              k_cache, v_cache, block_tables))
    return steps


def engine_decode(step: Step) -> torch.Tensor:
    """The engine's paged decode of ``step``: what a decode over the same rows must give."""
    ctx = step.context()
    set_context(ctx)
    try:
        return TorchAttentionBackend().decode(step.q, step.k_cache, step.v_cache, ctx, SCALE)
    finally:
        reset_context()


def _returned_none(name: str, case: str, result: Any) -> str | None:
    return None if result is None else say(RETURNED, name=name, case=case, type=type(result).__name__)


def _caches_difference(name: str, case: str, got: tuple[torch.Tensor, torch.Tensor],
                       want: tuple[torch.Tensor, torch.Tensor]) -> str | None:
    for which, mine, engines in zip(("k_cache", "v_cache"), got, want):
        problem = first_difference(f"{name} ({which})", case, mine, engines, 0.0, 0.0)
        if problem:
            return problem
    return None


def check_store_contiguous(seam: Seam, fn: Callable[..., Any]) -> str | None:
    """Each step's new rows written by ``fn`` into a contiguous cache holding the rows before them: the
    cache must then hold every row of every sequence, the tail left as it was."""
    g = torch.Generator().manual_seed(1)
    for step in decode_steps():
        want = step.contiguous(g)
        before = tuple(cache.clone() for cache in want)
        positions = torch.tensor(step.lengths) - 1
        rows = torch.arange(len(step.lengths))
        for cache in before:
            cache[rows, positions] = 7.0  # the new rows, not written yet
        new_k = torch.stack([k[-1] for k in step.keys])
        new_v = torch.stack([v[-1] for v in step.values])
        result = called(seam.qualname, step.case, fn, (new_k, new_v, *before, positions))
        problem = _returned_none(seam.qualname, step.case, result) or _caches_difference(seam.qualname, step.case,
                                                                                         before, want)
        if problem:
            return problem
    return None


def check_decode_contiguous(seam: Seam, fn: Callable[..., Any]) -> str | None:
    """``fn`` over a contiguous cache against the engine's paged decode over the same rows."""
    g = torch.Generator().manual_seed(2)
    with torch.inference_mode():
        for step in decode_steps():
            k_cache, v_cache = step.contiguous(g)
            lens = torch.tensor(step.lengths, dtype=torch.int32)
            got = called(seam.qualname, step.case, fn, (step.q.clone(), k_cache, v_cache, lens, SCALE))
            problem = first_difference(seam.qualname, step.case, got, engine_decode(step), RTOL, ATOL)
            if problem:
                return problem
    return None


def _learners_backend(seam: Seam, fn: Callable[..., Any]) -> Any:
    """An object of the learner's subclass of the engine's backend (its own helpers callable on ``self``)."""
    owner = fn.__globals__.get(seam.owner)
    return owner() if isinstance(owner, type) and issubclass(owner, TorchAttentionBackend) else TorchAttentionBackend()


def check_store_paged(seam: Seam, fn: Callable[..., Any]) -> str | None:
    """``fn`` and the engine's ``store_kvcache`` write the same rows into copies of one paged cache: a decode
    step's rows, and a prefill whose first tokens are cached already."""
    g = torch.Generator().manual_seed(3)
    backend, engine = _learners_backend(seam, fn), TorchAttentionBackend()
    cases = []
    for step in decode_steps():
        last = (torch.tensor(step.lengths) - 1).tolist()
        slots = torch.tensor([int(step.block_tables[i, n // BLOCK_SIZE]) * BLOCK_SIZE + n % BLOCK_SIZE
                              for i, n in enumerate(last)])
        new = (torch.randn(len(last), KV_HEADS, HEAD_DIM, generator=g),
               torch.randn(len(last), KV_HEADS, HEAD_DIM, generator=g))
        cases.append((step.case, new, step.k_cache, step.v_cache, slots))
    count, cached = 11, 6
    shape = (8, BLOCK_SIZE, KV_HEADS, HEAD_DIM)
    slots = torch.tensor([-1] * cached + [9, 10, 11, 20, 21])
    cases.append((say(PREFIX_CACHED, count=count, cached=cached),
                  (torch.randn(count, KV_HEADS, HEAD_DIM, generator=g), torch.randn(count, KV_HEADS, HEAD_DIM,
                                                                                    generator=g)),
                  torch.randn(shape, generator=g), torch.randn(shape, generator=g), slots))
    with torch.inference_mode():
        for case, (k, v), k_cache, v_cache, slots in cases:
            want = (k_cache.clone(), v_cache.clone())
            reset_context()
            engine.store_kvcache(k.clone(), v.clone(), *want, slots.clone())
            got = (k_cache.clone(), v_cache.clone())
            result = called(seam.qualname, case, fn, (backend, k.clone(), v.clone(), *got, slots.clone()))
            problem = _returned_none(seam.qualname, case, result) or _caches_difference(seam.qualname, case, got, want)
            if problem:
                return problem
    return None


def check_decode_paged(seam: Seam, fn: Callable[..., Any]) -> str | None:
    """``fn`` against the engine's decode over the same paged cache and block tables."""
    backend = _learners_backend(seam, fn)
    with torch.inference_mode():
        for step in decode_steps():
            ctx = step.context()
            set_context(ctx)
            try:
                got = called(seam.qualname, step.case, fn, (backend, step.q.clone(), step.k_cache.clone(),
                                                            step.v_cache.clone(), ctx, SCALE))
            finally:
                reset_context()
            problem = first_difference(seam.qualname, step.case, got, engine_decode(step), RTOL, ATOL)
            if problem:
                return problem
    return None


CACHE_CHECKS: dict[str, Callable[[Seam, Callable[..., Any]], str | None]] = {
    "store_contiguous": check_store_contiguous, "decode_contiguous": check_decode_contiguous,
    "TorchAttentionBackend.store_kvcache": check_store_paged, "TorchAttentionBackend.decode": check_decode_paged,
}
