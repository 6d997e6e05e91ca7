"""Execution layer: RMSNorm, optionally fused with the residual add that precedes it.

Qwen3 normalises in float32 and multiplies by the weight after casting back, so half-precision runs match
the reference model. ``torch.rms_norm`` does the normalisation in one operation instead of five;
``rms_norm_heads`` does several norms that differ only in their weights (Qwen3's query and key norms) with
one normalisation, through ``rms_norm`` too: every RMSNorm of the model normalises in that one function (the
build track's learner rewrites it, and their version then runs for the query and key heads as well).
"""

from __future__ import annotations

import torch
from torch import nn


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """``x`` divided by the root mean square of its last dimension (``eps`` added under the root), times
    ``weight``: computed in float32, cast back to ``x``'s dtype, then scaled (Qwen3's order)."""
    if x.dtype == torch.float32:
        # Bitwise the same as the half-precision path below, in one operation instead of two.
        return torch.rms_norm(x, weight.shape, weight, eps)
    return weight * torch.rms_norm(x.float(), weight.shape, eps=eps).to(x.dtype)


class RMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden_size), requires_grad=False)

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None):
        """Without ``residual``: the normalised ``x``. With it: ``(norm(x + residual), x + residual)``,
        the pre-norm decoder layer's two outputs in one call."""
        if residual is None:
            return rms_norm(x, self.weight, self.eps)
        residual = x + residual
        return rms_norm(residual, self.weight, self.eps), residual


def rms_norm_heads(x: torch.Tensor, norms: list[RMSNorm], heads: list[int]) -> torch.Tensor:
    """``norms[0]`` over the first ``heads[0]`` heads of ``x`` (tokens, heads, head_dim), ``norms[1]`` over
    the next ``heads[1]``, ...: one normalisation of every head, then each group scaled by its own weight in
    place. The same numbers as each norm called on its own heads."""
    eps = norms[0].eps
    assert all(norm.eps == eps for norm in norms)
    # A weight of ones changes no bit (1 * y == y in every dtype): the normalisation is rms_norm's, the weights
    # are each group's.
    out = rms_norm(x, x.new_ones(x.size(-1)), eps)
    for part, norm in zip(out.split(heads, dim=1), norms):
        part.mul_(norm.weight)
    return out
