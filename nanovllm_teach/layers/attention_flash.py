"""Execution layer: the flash-attn backend, as nano-vllm uses it (GPU only).

- ``store_kvcache``: our Triton kernel (``kernels.store_kvcache``); flash-attn has no scatter of its own.
- ``prefill``: ``flash_attn_varlen_func`` over the flattened batch (``cu_seqlens_q``/``cu_seqlens_k``).
  With a cached prefix, K/V are the whole paged cache and ``block_table`` tells flash-attn where each
  sequence's blocks are; the new tokens' K/V were stored just before, so the cache holds the full context.
- ``decode``: ``flash_attn_with_kvcache``, one query per sequence (``q`` gets a length-1 sequence axis),
  ``cache_seqlens`` = ``context_lens``, ``block_table`` = the block tables.

flash-attn 2 reads a paged cache only when the block size is a multiple of 256 (nano-vllm's block size),
and only in float16/bfloat16; ``flash_attn_unusable_reason`` says so before the engine starts.
``flash_attn`` and ``triton`` are imported inside the backend so that this module loads on any machine.
Emits no events.
"""

from __future__ import annotations

import torch

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.utils.context import Context

INSTALL_HINT = "pip install 'nanovllm_teach[gpu]'"
PAGE_MULTIPLE = 256  # flash-attn 2: "Paged KV cache block size must be divisible by 256"
NOT_IMPORTABLE = Text(en="flash_attn is not importable ({error}); install it with {hint}",
                      zh="无法导入 flash_attn（{error}）；请用 {hint} 安装")
NOT_ON_CUDA = Text(en="flash-attn runs on CUDA GPUs only, the device is {device}",
                   zh="flash-attn 只在 CUDA GPU 上运行，这里的设备是 {device}")
BLOCK_SIZE_NOT_MULTIPLE = Text(en="flash-attn needs kvcache_block_size to be a multiple of {multiple}, got {block_size}",
                               zh="flash-attn 要求 kvcache_block_size 是 {multiple} 的倍数，收到的是 {block_size}")
NOT_16_BIT = Text(en="flash-attn needs dtype float16 or bfloat16, got {dtype}",
                  zh="flash-attn 要求 dtype 为 float16 或 bfloat16，收到的是 {dtype}")


def flash_attn_unusable_reason(device: torch.device, block_size: int, dtype: torch.dtype) -> str | None:
    """Why flash-attn cannot serve this engine (None when it can)."""
    try:
        import flash_attn  # noqa: F401
    except ImportError as exc:
        return say(NOT_IMPORTABLE, error=exc, hint=INSTALL_HINT)
    if device.type != "cuda":
        return say(NOT_ON_CUDA, device=device)
    if block_size % PAGE_MULTIPLE:
        return say(BLOCK_SIZE_NOT_MULTIPLE, multiple=PAGE_MULTIPLE, block_size=block_size)
    if dtype not in (torch.float16, torch.bfloat16):
        return say(NOT_16_BIT, dtype=dtype)
    return None


class FlashAttentionBackend:
    name = "flash_attn"

    def __init__(self) -> None:
        try:
            from flash_attn import flash_attn_varlen_func, flash_attn_with_kvcache
        except ImportError as exc:
            raise ImportError(f"the flash_attn attention backend needs the flash-attn package: {INSTALL_HINT} "
                              "(or choose attention_backend='triton' or 'torch')") from exc
        from nanovllm_teach.kernels import store_kvcache
        self._varlen = flash_attn_varlen_func
        self._with_kvcache = flash_attn_with_kvcache
        self._store = store_kvcache

    def store_kvcache(self, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
                      v_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
        self._store(k, v, k_cache, v_cache, slot_mapping)

    def prefill(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
                v_cache: torch.Tensor, ctx: Context, scale: float) -> torch.Tensor:
        if ctx.block_tables is not None:  # a cached prefix: read every key through the block table
            k, v = k_cache, v_cache
        return self._varlen(q, k, v, cu_seqlens_q=ctx.cu_seqlens_q, cu_seqlens_k=ctx.cu_seqlens_k,
                            max_seqlen_q=ctx.max_seqlen_q, max_seqlen_k=ctx.max_seqlen_k,
                            softmax_scale=scale, causal=True, block_table=ctx.block_tables)

    def decode(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
               ctx: Context, scale: float) -> torch.Tensor:
        out = self._with_kvcache(q.unsqueeze(1), k_cache, v_cache, cache_seqlens=ctx.context_lens,
                                 block_table=ctx.block_tables, softmax_scale=scale, causal=True)
        return out.squeeze(1)
