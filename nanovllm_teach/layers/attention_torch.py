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

    def decode(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
               ctx: Context, scale: float) -> torch.Tensor:
        # Gather every sequence's blocks at once (padding entries of -1 read block 0, then get masked).
        tables = ctx.block_tables.clamp(min=0)
        batch, max_blocks = tables.shape
        k = k_cache[tables].view(batch, max_blocks * k_cache.size(1), *k_cache.shape[2:])
        v = v_cache[tables].view(batch, max_blocks * v_cache.size(1), *v_cache.shape[2:])
        visible = torch.arange(k.size(1), device=q.device).unsqueeze(0) < ctx.context_lens.unsqueeze(1)
        out = F.scaled_dot_product_attention(
            q.unsqueeze(2), k.transpose(1, 2), v.transpose(1, 2),
            attn_mask=visible[:, None, None, :], scale=scale, enable_gqa=q.size(1) != k.size(2))
        return out.squeeze(2)
