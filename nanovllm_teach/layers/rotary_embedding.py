"""Execution layer: rotary position embedding (RoPE), the "rotate half" form Qwen3 uses.

Positions come in explicitly (one per flattened token), which is what lets a prefill chunk or a decode
token sit at any absolute position without padding. Every layer rotates by the same angles, so the model
looks up each token's cos/sin once per step (``RotaryEmbedding.forward``) and every layer applies them
(``apply_rotary``).
"""

from __future__ import annotations

import torch
from torch import nn

from nanovllm_teach.i18n import Text, say

# Read from a checkpoint's config.json, which is the user's.
UNSUPPORTED_ROPE = Text(en="unsupported rope type {rope_type!r} / rope_scaling={scaling!r}: only default RoPE",
                        zh="不支持的 rope 类型 {rope_type!r} / rope_scaling={scaling!r}：只支持默认的 RoPE")
NO_ROPE_THETA = Text(en="the model config has no rope_theta", zh="模型的 config 里没有 rope_theta")


def rope_theta_of(hf_config) -> float:
    """RoPE base from a Hugging Face config, old style (``rope_theta``) or new (``rope_parameters``)."""
    params = getattr(hf_config, "rope_parameters", None) or {}
    rope_type = params.get("rope_type", params.get("type", "default"))
    scaling = getattr(hf_config, "rope_scaling", None)
    if rope_type != "default" or (scaling and scaling.get("rope_type", scaling.get("type")) != "default"):
        raise ValueError(say(UNSUPPORTED_ROPE, rope_type=rope_type, scaling=scaling))
    theta = params.get("rope_theta", getattr(hf_config, "rope_theta", None))
    if theta is None:
        raise ValueError(say(NO_ROPE_THETA))
    return float(theta)


def cos_sin_table(head_dim: int, max_position: int, base: float) -> torch.Tensor:
    """The angles of every position, (max_position, 2, head_dim) in float32: pair ``i`` of a head turns by
    ``position * base ** (-2i / head_dim)``; row ``[p, 0]`` is ``[cos | cos]`` and ``[p, 1]`` is ``[-sin | sin]``
    of position ``p``'s angles, laid out for ``apply_rotary``."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim))
    freqs = torch.outer(torch.arange(max_position, dtype=torch.float), inv_freq)
    cos, sin = freqs.cos(), freqs.sin()
    return torch.stack([torch.cat([cos, cos], dim=-1), torch.cat([-sin, sin], dim=-1)], dim=1)


class RotaryEmbedding(nn.Module):
    def __init__(self, head_dim: int, max_position: int, base: float) -> None:
        super().__init__()
        self.register_buffer("cos_sin_cache", cos_sin_table(head_dim, max_position, base), persistent=False)

    def forward(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The cos and sin rows of every token, each (tokens, 1, head_dim): broadcast over the heads."""
        cos, sin = self.cos_sin_cache[positions].unsqueeze(2).unbind(1)
        return cos, sin


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each pair (x1[i], x2[i]) of the two halves of every head by its angle:
    ``[x1 cos - x2 sin | x2 cos + x1 sin]``, written as ``x * [cos | cos] + [x2 | x1] * [-sin | sin]``
    (``roll`` swaps the halves), computed in float32. ``x``: (tokens, heads, head_dim)."""
    xf = x.float()
    return (xf * cos + xf.roll(x.size(-1) // 2, dims=-1) * sin).to(x.dtype)
