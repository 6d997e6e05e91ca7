"""Execution layer: turn each row of logits into one token id.

Temperature 0 is greedy (argmax, exactly what ``transformers`` greedy decoding picks). Otherwise the
Gumbel-max form of sampling: ``argmax(softmax(logits / T) / E)`` with ``E ~ Exponential(1)`` draws from
the softmax distribution without a cumulative sum. A row with its own seed draws its noise from its own
generator, so its tokens do not depend on what else shares the batch.
"""

from __future__ import annotations

import torch
from torch import nn


class Sampler(nn.Module):
    def forward(self, logits: torch.Tensor, temperatures: torch.Tensor,
                seeds: list[int | None]) -> torch.Tensor:
        logits = logits.float()
        greedy = logits.argmax(dim=-1)
        if not bool((temperatures > 0).any()):
            return greedy
        probs = torch.softmax(logits / temperatures.clamp_min(1e-5).unsqueeze(1), dim=-1)
        noise = torch.empty_like(probs).exponential_()
        for row, seed in enumerate(seeds):
            if seed is not None:
                generator = torch.Generator(device=probs.device).manual_seed(seed)
                noise[row] = torch.empty(probs.size(1), device=probs.device).exponential_(generator=generator)
        sampled = probs.div_(noise.clamp_min_(1e-10)).argmax(dim=-1)
        return torch.where(temperatures == 0, greedy, sampled)
