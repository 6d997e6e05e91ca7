"""Execution layer: the plain PyTorch attention backend (the reference the other backends are tested
against, and the CPU backend where the ``cpp`` one cannot be built). Emits no events.

It does with ordinary tensor indexing what the GPU kernels do with hand-written loops: scatter new K/V
rows into cache slots, and gather a sequence's keys back through its block table.

A decode step runs the same attention in every layer with the same batch, so everything that depends only
on the batch (the order of the sequences, the cache slots to read and to write, the padding masks) is
worked out once per step, by the first layer, as a ``DecodePlan`` and a ``StorePlan`` kept on the step's
``Context``; the other layers reuse them.

Why copy the keys out of the cache at all, instead of attending over the block table in place? Plain
PyTorch can do that too (one batch row per cache block, the per-block results merged across a sequence's
blocks by their log-sum-exps; notebook 11 builds it), and on a 2-core CPU with the shipped model it took
1.2-1.4 times as long per decode step at batch 48. The copy is one streaming read of the rows, which runs at
the machine's memory bandwidth, into a buffer that then sits in the processor's cache, where the attention
kernel reads it fast; pointed at the cache itself, the same kernel waits on main memory block after block,
and also reads the unused tail of every sequence's last block. The copy must still be in the processor's
cache when it is read, so each layer gathers one group's rows (one ``index_select`` for K, one for V) just
before attending over them: gathering the whole batch first was slower at batch 64, its copy no longer
fitting. The rows go into two buffers the backend keeps from step to step: a fresh multi-megabyte tensor in
every layer would cost more than the copy itself (the allocator hands such blocks back to the operating
system when they are freed, and every page of the next one is faulted in and zeroed again).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import register_flop_formula

from nanovllm_teach.utils.context import Context, get_context

# Decode attends in groups of similar context length, about this many sequences each (see ``plan_decode``).
DECODE_GROUP_ROWS = 8
MAX_DECODE_GROUPS = 8


def _gather_blocks(cache: torch.Tensor, block_table: torch.Tensor, length: int) -> torch.Tensor:
    """The first ``length`` cached rows of one sequence, in order: (length, kv_heads, head_dim)."""
    return cache[block_table].flatten(0, 1)[:length]


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
            mask: torch.Tensor | None, is_causal: bool) -> torch.Tensor:
    """SDPA over one sequence, as heads-first views with a batch of one: PyTorch runs its flash-attention
    kernel for 4-D inputs on a CPU, and a slower fallback (scores, softmax, product, each materialised) for
    3-D ones. ``enable_gqa`` lets several query heads share one K/V head."""
    out = F.scaled_dot_product_attention(
        q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None],
        attn_mask=mask, is_causal=is_causal, scale=scale, enable_gqa=q.size(1) != k.size(1))
    return out[0].transpose(0, 1)


def causal_prefill(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor,
                   scale: float) -> torch.Tensor:
    """Prefill without a cached prefix: the batch's sequences lie one after another in ``q``, ``k`` and ``v``
    (tokens, heads or kv_heads, head_dim), sequence ``i`` in rows ``cu_seqlens[i]:cu_seqlens[i + 1]``; each
    token attends to the tokens of its own sequence up to itself."""
    bounds = cu_seqlens.tolist()
    out = torch.empty_like(q)
    for start, stop in zip(bounds, bounds[1:]):
        out[start:stop] = attend(q[start:stop], k[start:stop], v[start:stop], scale, None, is_causal=True)
    return out


@register_flop_formula(torch.ops.aten._scaled_dot_product_flash_attention_for_cpu)
def _flash_attention_cpu_flops(query_shape, key_shape, *args, **kwargs) -> int:
    """PyTorch's FLOP counter knows its GPU attention kernels, not this CPU one: the scores and the weighted
    sum, 2 FLOPs per query, key and head dimension each, over the whole square (as the counter counts the
    matrix products of the fallback: it does not skip what a causal mask hides)."""
    batch, heads, len_q, head_dim = query_shape
    return 4 * batch * heads * len_q * key_shape[-2] * head_dim


@dataclass
class DecodeGroup:
    """Sequences ``start:stop`` of the sorted batch, attended together, padded to their longest context.
    The cache slots they read are ``offset:offset + rows * length`` of the plan's ``slots``."""

    start: int
    stop: int
    length: int
    offset: int
    mask: torch.Tensor | None  # (rows, 1, 1, length): 0 where a position is real, -inf where it is padding;
    # None when none is padding. Added to the scores as it is (a boolean mask would be converted every layer).


@dataclass
class DecodePlan:
    """How every layer of one decode step reads the cache: sorted by context length, in groups."""

    order: torch.Tensor | None  # sorted position -> batch row (None: the batch is not reordered)
    restore: torch.Tensor | None  # batch row -> sorted position
    slots: torch.Tensor  # the cache slot of every (sequence, position) of every group; padding reads slot 0
    groups: list[DecodeGroup]


def plan_decode(ctx: Context, block_size: int, dtype: torch.dtype) -> DecodePlan:
    """Padding everyone to the batch's longest context wastes most of the work when lengths differ
    (reading K/V and attending over masked-out slots). Sorting by length and attending in groups of about
    ``DECODE_GROUP_ROWS`` sequences pads each group only to its own longest context. Sorted, each group is a
    contiguous slice of the batch. The slots of all groups, one after the other, are built with a few
    operations for the whole batch: row ``r`` of the sorted batch reads ``width[r]`` slots (its group's
    length), at positions 0, 1, ...; those past its own context read slot 0 and are masked out."""
    lens, tables = ctx.context_lens, ctx.block_tables
    order = restore = None
    num_groups = max(1, min(MAX_DECODE_GROUPS, lens.numel() // DECODE_GROUP_ROWS))
    if num_groups > 1:
        order = torch.argsort(lens, stable=True)
        restore = torch.argsort(order)
        lens, tables = lens[order], tables[order]
    host_lens = lens.tolist()  # the one host read of the step: each group's padded length
    edges = [len(host_lens) * g // num_groups for g in range(num_groups + 1)]
    bounds = list(zip(edges, edges[1:]))
    lengths = [max(host_lens[start:stop]) for start, stop in bounds]
    offsets = [0]
    for (start, stop), length in zip(bounds, lengths):
        offsets.append(offsets[-1] + (stop - start) * length)
    # The slot of every (sequence, position) up to the longest context, padding pointing at slot 0 ...
    pos = torch.arange(max(lengths), device=lens.device)
    visible = pos < lens.unsqueeze(1)
    grid = torch.where(visible, tables[:, pos // block_size].long() * block_size + pos % block_size, 0)
    mask = torch.zeros(visible.shape, dtype=dtype, device=lens.device).masked_fill_(~visible, float("-inf"))
    # ... then each group's rows cut to its own length, one group after the other.
    slots = torch.cat([grid[start:stop, :length].flatten() for (start, stop), length in zip(bounds, lengths)])
    groups = []
    for (start, stop), length, offset in zip(bounds, lengths, offsets):
        padded = min(host_lens[start:stop]) < length
        part = mask[start:stop, None, None, :length]
        groups.append(DecodeGroup(start, stop, length, offset, part if padded else None))
    return DecodePlan(order, restore, slots, groups)


@dataclass
class StorePlan:
    """Where one step's new K/V rows go: ``rows`` of ``k``/``v`` (None: all of them) into cache ``slots``."""

    rows: torch.Tensor | None
    slots: torch.Tensor


def plan_store(slot_mapping: torch.Tensor) -> StorePlan:
    """A slot of -1 marks a token whose K/V is already cached (or padding): nothing to write. A decode
    step has none, and then the rows are written as they come."""
    keep = slot_mapping >= 0
    if bool(keep.all()):
        return StorePlan(None, slot_mapping)
    rows = keep.nonzero().squeeze(1)
    return StorePlan(rows, slot_mapping[rows])


class TorchAttentionBackend:
    name = "torch"

    def __init__(self) -> None:
        self._buffers: dict[str, torch.Tensor] = {}

    def _gather(self, name: str, rows: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
        """``rows[slots]``, written into the reusable buffer ``name`` (grown when a step needs more)."""
        needed = slots.numel() * math.prod(rows.shape[1:])
        buf = self._buffers.get(name)
        if buf is None or buf.numel() < needed or buf.dtype != rows.dtype or buf.device != rows.device:
            buf = self._buffers[name] = rows.new_empty(needed)
        return torch.index_select(rows, 0, slots, out=buf[:needed].view(slots.numel(), *rows.shape[1:]))

    def store_kvcache(self, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
                      v_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
        # The step's own slots are planned once, by the first layer; any other slot mapping is planned here.
        ctx = get_context()
        plan = (ctx.once_per_step("torch_store_plan", lambda: plan_store(slot_mapping))
                if slot_mapping is ctx.slot_mapping else plan_store(slot_mapping))
        if plan.rows is not None:
            k, v = k.index_select(0, plan.rows), v.index_select(0, plan.rows)
        k_cache.view(-1, *k_cache.shape[2:]).index_copy_(0, plan.slots, k)
        v_cache.view(-1, *v_cache.shape[2:]).index_copy_(0, plan.slots, v)

    def prefill(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
                v_cache: torch.Tensor, ctx: Context, scale: float) -> torch.Tensor:
        if ctx.block_tables is None:
            return causal_prefill(q, k, v, ctx.cu_seqlens_q, scale)
        cu_q = ctx.cu_seqlens_q.tolist()
        cu_k = ctx.cu_seqlens_k.tolist()
        out = torch.empty_like(q)
        for i in range(len(cu_q) - 1):
            q_i = q[cu_q[i]:cu_q[i + 1]]
            len_q, len_k = cu_q[i + 1] - cu_q[i], cu_k[i + 1] - cu_k[i]
            # A cached prefix: the new tokens' K/V were just stored, so the whole context is in the cache.
            k_i = _gather_blocks(k_cache, ctx.block_tables[i], len_k)
            v_i = _gather_blocks(v_cache, ctx.block_tables[i], len_k)
            if len_q == len_k:
                out[cu_q[i]:cu_q[i + 1]] = attend(q_i, k_i, v_i, scale, None, is_causal=True)
            else:
                # Query j sits at absolute position len_k - len_q + j and sees keys up to it.
                q_pos = torch.arange(len_k - len_q, len_k, device=q.device).unsqueeze(1)
                mask = torch.arange(len_k, device=q.device).unsqueeze(0) <= q_pos
                out[cu_q[i]:cu_q[i + 1]] = attend(q_i, k_i, v_i, scale, mask, is_causal=False)
        return out

    def decode(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
               ctx: Context, scale: float) -> torch.Tensor:
        """One query per sequence over its cached rows, group by group of the step's ``DecodePlan``.

        The query heads that share a K/V head go in as that head's queries, several rows of one attention
        (``(rows, kv_heads, heads per kv head, head_dim)``): the kernel then reads each K/V row once for
        all of them, instead of once per query head."""
        plan = ctx.once_per_step(("torch_decode_plan", k_cache.size(1), q.dtype),
                                 lambda: plan_decode(ctx, k_cache.size(1), q.dtype))
        if plan.order is not None:
            q = q.index_select(0, plan.order)
        kv_heads, head_dim = k_cache.shape[2:]
        q = q.view(q.size(0), kv_heads, -1, head_dim)
        k_rows, v_rows = k_cache.flatten(0, 1), v_cache.flatten(0, 1)
        outs = []
        for group in plan.groups:
            rows = group.stop - group.start
            slots = plan.slots[group.offset:group.offset + rows * group.length]
            k = self._gather("k", k_rows, slots).view(rows, group.length, kv_heads, head_dim).transpose(1, 2)
            v = self._gather("v", v_rows, slots).view(rows, group.length, kv_heads, head_dim).transpose(1, 2)
            outs.append(F.scaled_dot_product_attention(q[group.start:group.stop], k, v,
                                                       attn_mask=group.mask, scale=scale))
        out = (torch.cat(outs) if len(outs) > 1 else outs[0]).flatten(1, 2)
        return out if plan.restore is None else out.index_select(0, plan.restore)
