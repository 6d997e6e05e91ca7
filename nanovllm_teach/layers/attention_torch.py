"""Execution layer: the plain PyTorch attention backend (the CPU default, and the reference the other
backends are tested against).

It does with ordinary tensor indexing what the GPU kernels do with hand-written loops: scatter new K/V
rows into cache slots, and gather a sequence's keys back through its block table.

A decode step runs the same attention in every layer with the same batch, so everything that depends only
on the batch (the order of the sequences, the cache slots to read, the padding masks) is worked out once
per step, by the first layer, as a ``DecodePlan`` kept on the step's ``Context``; the other layers reuse it.

The gathered K/V rows of a decode group are copied into two buffers the backend keeps from step to step.
A fresh multi-megabyte tensor in every layer would cost more than the copy itself: the allocator hands such
blocks back to the operating system when they are freed, and every page of the next one is faulted in and
zeroed again.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from nanovllm_teach.utils.context import Context

# Decode attends in this many groups of similar context length (see ``plan_decode``).
DECODE_GROUPS = 4


def _gather_blocks(cache: torch.Tensor, block_table: torch.Tensor, length: int) -> torch.Tensor:
    """The first ``length`` cached rows of one sequence, in order: (length, kv_heads, head_dim)."""
    return cache[block_table].flatten(0, 1)[:length]


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
            mask: torch.Tensor | None, is_causal: bool) -> torch.Tensor:
    """SDPA over heads-first views; ``enable_gqa`` lets several query heads share one K/V head."""
    out = F.scaled_dot_product_attention(
        q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
        attn_mask=mask, is_causal=is_causal, scale=scale, enable_gqa=q.size(1) != k.size(1))
    return out.transpose(0, 1)


@dataclass
class DecodeGroup:
    """Sequences ``start:stop`` of the sorted batch, attended together, padded to their longest context."""

    start: int
    stop: int
    length: int
    slots: torch.Tensor  # (rows * length,) the cache slot of every (sequence, position); padding reads slot 0
    visible: torch.Tensor | None  # (rows, 1, 1, length) which positions are real; None when none is padding


@dataclass
class DecodePlan:
    """How every layer of one decode step reads the cache: sorted by context length, in groups."""

    order: torch.Tensor | None  # sorted position -> batch row (None: the batch is not reordered)
    restore: torch.Tensor | None  # batch row -> sorted position
    groups: list[DecodeGroup]


def plan_decode(ctx: Context, block_size: int) -> DecodePlan:
    """Padding everyone to the batch's longest context wastes most of the work when lengths differ
    (reading K/V and attending over masked-out slots). Sorting by length and attending in a few groups
    pads each group only to its own longest context. Sorted, each group is a contiguous slice of the batch."""
    lens, tables = ctx.context_lens, ctx.block_tables
    order = restore = None
    num_groups = DECODE_GROUPS if lens.numel() >= 2 * DECODE_GROUPS else 1
    if num_groups > 1:
        order = torch.argsort(lens, stable=True)
        restore = torch.argsort(order)
        lens, tables = lens[order], tables[order]
    host_lens = lens.tolist()  # the one host read of the step: each group's padded length
    bounds = [len(host_lens) * g // num_groups for g in range(num_groups + 1)]
    groups = []
    for start, stop in zip(bounds, bounds[1:]):
        length = max(host_lens[start:stop])
        pos = torch.arange(length, device=lens.device)
        visible = pos < lens[start:stop].unsqueeze(1)
        slots = tables[start:stop, pos // block_size].long() * block_size + pos % block_size
        padded = min(host_lens[start:stop]) < length
        groups.append(DecodeGroup(start, stop, length, torch.where(visible, slots, 0).flatten(),
                                  visible[:, None, None, :] if padded else None))
    return DecodePlan(order, restore, groups)


class TorchAttentionBackend:
    name = "torch"

    def __init__(self) -> None:
        self._buffers: dict[str, torch.Tensor] = {}

    def _gather(self, name: str, rows: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
        """``rows[slots]``, written into the reusable buffer ``name`` (grown when a step needs more)."""
        needed = slots.numel() * rows[0].numel()
        buf = self._buffers.get(name)
        if buf is None or buf.numel() < needed or buf.dtype != rows.dtype or buf.device != rows.device:
            buf = self._buffers[name] = rows.new_empty(needed)
        return torch.index_select(rows, 0, slots, out=buf[:needed].view(slots.numel(), *rows.shape[1:]))

    def store_kvcache(self, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
                      v_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
        # A slot of -1 marks a token whose K/V is already cached (or padding): nothing to write.
        keep = slot_mapping >= 0
        slots = slot_mapping[keep]
        k_cache.view(-1, *k_cache.shape[2:])[slots] = k[keep]
        v_cache.view(-1, *v_cache.shape[2:])[slots] = v[keep]

    def prefill(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
                v_cache: torch.Tensor, ctx: Context, scale: float) -> torch.Tensor:
        cu_q = ctx.cu_seqlens_q.tolist()
        cu_k = ctx.cu_seqlens_k.tolist()
        out = torch.empty_like(q)
        for i in range(len(cu_q) - 1):
            q_i = q[cu_q[i]:cu_q[i + 1]]
            len_q, len_k = cu_q[i + 1] - cu_q[i], cu_k[i + 1] - cu_k[i]
            if ctx.block_tables is None:
                k_i, v_i = k[cu_k[i]:cu_k[i + 1]], v[cu_k[i]:cu_k[i + 1]]
            else:
                # A cached prefix: the new tokens' K/V were just stored, so the whole context is in the cache.
                k_i = _gather_blocks(k_cache, ctx.block_tables[i], len_k)
                v_i = _gather_blocks(v_cache, ctx.block_tables[i], len_k)
            if len_q == len_k:
                out[cu_q[i]:cu_q[i + 1]] = _attend(q_i, k_i, v_i, scale, None, is_causal=True)
            else:
                # Query j sits at absolute position len_k - len_q + j and sees keys up to it.
                q_pos = torch.arange(len_k - len_q, len_k, device=q.device).unsqueeze(1)
                mask = torch.arange(len_k, device=q.device).unsqueeze(0) <= q_pos
                out[cu_q[i]:cu_q[i + 1]] = _attend(q_i, k_i, v_i, scale, mask, is_causal=False)
        return out

    def decode(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
               ctx: Context, scale: float) -> torch.Tensor:
        """One query per sequence over its cached rows, group by group of the step's ``DecodePlan``."""
        plan = ctx.once_per_step(("torch_decode_plan", k_cache.size(1)), lambda: plan_decode(ctx, k_cache.size(1)))
        if plan.order is not None:
            q = q.index_select(0, plan.order)
        k_rows, v_rows = k_cache.flatten(0, 1), v_cache.flatten(0, 1)
        outs = []
        for group in plan.groups:
            shape = (group.stop - group.start, group.length, *k_cache.shape[2:])
            k = self._gather("k", k_rows, group.slots).view(shape).transpose(1, 2)
            v = self._gather("v", v_rows, group.slots).view(shape).transpose(1, 2)
            out = F.scaled_dot_product_attention(q[group.start:group.stop].unsqueeze(2), k, v,
                                                 attn_mask=group.visible, scale=scale,
                                                 enable_gqa=q.size(1) != k.size(1))
            outs.append(out.squeeze(2))
        out = torch.cat(outs) if len(outs) > 1 else outs[0]
        return out if plan.restore is None else out.index_select(0, plan.restore)
