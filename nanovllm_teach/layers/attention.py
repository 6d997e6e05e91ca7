"""Execution layer: paged attention with interchangeable backends.

Each ``Attention`` layer owns a view of the KV cache (``k_cache``/``v_cache``, shape
``(num_blocks, block_size, num_kv_heads, head_dim)``), bound by the model runner after it sized the
cache. A forward pass does two things, both driven by the step's ``Context``:

1. store: write this step's new K/V rows into the cache slots named by ``slot_mapping``;
2. attend: prefill attends causally within each sequence (reading a cached prefix back through the
   block tables when there is one); decode attends from one query per sequence over all of its cached keys.

How those two things are computed is the backend's business: plain PyTorch (the reference), plain PyTorch
with a C++ decode kernel (the CPU default), Triton kernels, or flash-attn. All of them must give the same
tokens under greedy sampling.
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import nn

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.utils.context import Context, get_context

UNKNOWN_BACKEND = Text(en="unknown attention_backend {name!r}; choose from: torch, cpp, triton, flash_attn",
                       zh="没有 attention_backend {name!r}；可选：torch, cpp, triton, flash_attn")


class AttentionBackend(Protocol):
    name: str

    def store_kvcache(self, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
                      v_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None: ...

    def prefill(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
                v_cache: torch.Tensor, ctx: Context, scale: float) -> torch.Tensor: ...

    def decode(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
               ctx: Context, scale: float) -> torch.Tensor: ...


def make_attention_backend(name: str) -> AttentionBackend:
    """The backend called ``name``: ``torch``, ``cpp``, ``triton`` or ``flash_attn`` (each imported only when
    chosen, so a machine without triton or flash-attn never loads them)."""
    if name == "torch":
        from nanovllm_teach.layers.attention_torch import TorchAttentionBackend
        return TorchAttentionBackend()
    if name == "cpp":
        from nanovllm_teach.layers.attention_cpp import CppAttentionBackend
        return CppAttentionBackend()
    if name == "triton":
        from nanovllm_teach.layers.attention_triton import TritonAttentionBackend
        return TritonAttentionBackend()
    if name == "flash_attn":
        from nanovllm_teach.layers.attention_flash import FlashAttentionBackend
        return FlashAttentionBackend()
    raise ValueError(say(UNKNOWN_BACKEND, name=name))


class Attention(nn.Module):
    def __init__(self, num_heads: int, head_dim: int, scale: float, num_kv_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = head_dim
        self.scale = scale
        self.num_kv_heads = num_kv_heads
        # Empty until the model runner binds this layer's slice of the KV cache: a model used on its own
        # (warm-up, parity tests) attends within the batch and stores nothing.
        self.k_cache = self.v_cache = torch.tensor([])
        self.backend: AttentionBackend = make_attention_backend("torch")

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """``q``: (tokens, heads, head_dim); ``k``, ``v``: (tokens, kv_heads, head_dim)."""
        ctx = get_context()
        if self.k_cache.numel():
            self.backend.store_kvcache(k, v, self.k_cache, self.v_cache, ctx.slot_mapping)
        if ctx.is_prefill:
            return self.backend.prefill(q, k, v, self.k_cache, self.v_cache, ctx, self.scale)
        return self.backend.decode(q, self.k_cache, self.v_cache, ctx, self.scale)
