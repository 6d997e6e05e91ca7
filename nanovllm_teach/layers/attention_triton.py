"""Execution layer: the Triton attention backend — the three steps of paged attention as our own kernels.

- ``store_kvcache``: ``kernels.store_kvcache`` (one program per token, slot -1 skipped);
- ``prefill``: ``kernels.prefill_attention`` (varlen causal; with a cached prefix the keys are read from
  the cache through the block tables);
- ``decode``: ``kernels.paged_decode_attention`` (one program per sequence and query head).

Every step has a kernel, so nothing falls back to the torch backend. None of the three reads a value
back to the host, which is what makes the decode step capturable in a CUDA graph.

On a GPU the kernels are compiled; on a CPU they run under the Triton interpreter, which is slow but
exact, and only when ``TRITON_INTERPRET=1`` was in the environment before Python started (the tests'
``conftest.py`` sets it before anything imports torch, which imports triton).
Emits no events.
"""

from __future__ import annotations

import torch

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.utils.context import Context

INSTALL_HINT = "pip install 'nanovllm_teach[gpu]'"
NOT_IMPORTABLE = Text(en="triton is not importable ({error}); install it with {hint}",
                      zh="无法导入 triton（{error}）；请用 {hint} 安装")
INTERPRET_CHANGED = Text(
    en="TRITON_INTERPRET was changed after triton was imported (importing torch imports triton), so Triton's own "
       "helpers and the kernels disagree on being interpreted: set TRITON_INTERPRET=1 in the environment before "
       "starting Python",
    zh="TRITON_INTERPRET 是在导入 triton 之后才改的（导入 torch 时就会导入 triton），于是 Triton 自己的辅助函数和"
       "这些内核对是否解释执行看法不一：请在启动 Python 之前就在环境里设置 TRITON_INTERPRET=1")
NEEDS_GPU_OR_INTERPRETER = Text(
    en="the Triton kernels need a GPU, or the Triton interpreter on {device}: set TRITON_INTERPRET=1 in the "
       "environment before starting Python",
    zh="Triton 内核需要 GPU；在 {device} 上则需要 Triton 解释器：请在启动 Python 之前在环境里设置 TRITON_INTERPRET=1")


def triton_unusable_reason(device: torch.device) -> str | None:
    """Why the Triton backend cannot run on ``device`` (None when it can)."""
    try:
        from nanovllm_teach import kernels
    except ImportError as exc:
        return say(NOT_IMPORTABLE, error=exc, hint=INSTALL_HINT)
    if kernels.INTERPRETED != kernels.TRITON_HELPERS_INTERPRETED:
        return say(INTERPRET_CHANGED)
    if device.type == "cuda" or kernels.INTERPRETED:
        return None
    return say(NEEDS_GPU_OR_INTERPRETER, device=device.type)


class TritonAttentionBackend:
    name = "triton"

    def __init__(self) -> None:
        # Imported here, not at the top: this module (and its availability check) must load without triton.
        from nanovllm_teach import kernels
        self.kernels = kernels

    def store_kvcache(self, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
                      v_cache: torch.Tensor, slot_mapping: torch.Tensor) -> None:
        self.kernels.store_kvcache(k, v, k_cache, v_cache, slot_mapping)

    def prefill(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
                v_cache: torch.Tensor, ctx: Context, scale: float) -> torch.Tensor:
        return self.kernels.prefill_attention(q, k, v, k_cache, v_cache, ctx.cu_seqlens_q, ctx.cu_seqlens_k,
                                              ctx.max_seqlen_q, ctx.block_tables, scale)

    def decode(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
               ctx: Context, scale: float) -> torch.Tensor:
        return self.kernels.paged_decode_attention(q, k_cache, v_cache, ctx.block_tables, ctx.context_lens, scale)
