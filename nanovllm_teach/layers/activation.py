"""Execution layer: SiLU-and-multiply, the gate of Qwen3's MLP applied to its packed gate/up output."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    """The first half of ``x``'s last dimension (the gate) through SiLU, times the second half (up)."""
    gate, up = x.chunk(2, dim=-1)
    return F.silu(gate) * up


class SiluAndMul(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return silu_and_mul(x)
