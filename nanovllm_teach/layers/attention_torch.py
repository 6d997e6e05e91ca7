"""Execution layer: the plain PyTorch attention backend (the CPU default, and the reference the other
backends are tested against).

It does with ordinary tensor indexing what the GPU kernels do with hand-written loops: scatter new K/V
rows into cache slots, and gather a sequence's keys back through its block table.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from nanovllm_teach.utils.context import Context


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


class TorchAttentionBackend:
    name = "torch"

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

    # Decode attends in this many groups of similar context length (see ``decode``).
    decode_groups = 4

    def decode(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
               ctx: Context, scale: float) -> torch.Tensor:
        # Padding everyone to the batch's longest context wastes most of the work when lengths differ
        # (reading K/V and attending over masked-out slots). Sorting by length and attending in a few
        # groups pads each group only to its own longest context.
        lens = ctx.context_lens
        if q.size(0) < 2 * self.decode_groups:
            return _decode_padded(q, k_cache, v_cache, ctx.block_tables, lens, scale)
        out = torch.empty_like(q)
        for rows in torch.tensor_split(torch.argsort(lens), self.decode_groups):
            out[rows] = _decode_padded(q[rows], k_cache, v_cache, ctx.block_tables[rows], lens[rows], scale)
        return out


def _decode_padded(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_tables: torch.Tensor,
                   context_lens: torch.Tensor, scale: float) -> torch.Tensor:
    """One query per sequence over its first ``context_lens`` cached rows, padded to the longest of them."""
    batch, block_size = q.size(0), k_cache.size(1)
    length = int(context_lens.max())
    pos = torch.arange(length, device=q.device)
    visible = pos.unsqueeze(0) < context_lens.unsqueeze(1)
    # The cache slot of every (sequence, position): exactly ``length`` rows each, not whole blocks;
    # padding positions read slot 0 and are masked out.
    slots = block_tables[:, pos // block_size].long() * block_size + pos % block_size
    slots = torch.where(visible, slots, 0).flatten()
    k = k_cache.flatten(0, 1).index_select(0, slots).view(batch, length, *k_cache.shape[2:])
    v = v_cache.flatten(0, 1).index_select(0, slots).view(batch, length, *v_cache.shape[2:])
    out = F.scaled_dot_product_attention(
        q.unsqueeze(2), k.transpose(1, 2), v.transpose(1, 2),
        attn_mask=visible[:, None, None, :], scale=scale, enable_gqa=q.size(1) != k.size(2))
    return out.squeeze(2)
