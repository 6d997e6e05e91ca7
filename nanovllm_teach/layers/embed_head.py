"""Execution layer: the vocabulary-parallel token embedding and LM head.

Each rank holds a contiguous slice of the vocabulary. The embedding looks up only the ids it owns and
the partial results are summed across ranks; the LM head computes logits for its slice and rank 0
gathers the full vocabulary row.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from nanovllm_teach.layers.onednn_linear import linear
from nanovllm_teach.layers.parallel import divide, tp_rank, tp_size


class VocabParallelEmbedding(nn.Module):
    def __init__(self, num_embeddings: int, embedding_dim: int) -> None:
        super().__init__()
        self.tp_rank = tp_rank()
        self.tp_size = tp_size()
        self.num_embeddings = num_embeddings
        self.shard_size = divide(num_embeddings, self.tp_size, "vocab_size")
        self.vocab_start = self.shard_size * self.tp_rank
        self.vocab_end = self.vocab_start + self.shard_size
        self.weight = nn.Parameter(torch.empty(self.shard_size, embedding_dim), requires_grad=False)
        self.weight.weight_loader = self.weight_loader

    def weight_loader(self, param: nn.Parameter, loaded_weight: torch.Tensor) -> None:
        param.data.copy_(loaded_weight.narrow(0, self.vocab_start, self.shard_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.tp_size == 1:
            return F.embedding(x, self.weight)
        owned = (x >= self.vocab_start) & (x < self.vocab_end)
        y = F.embedding((x - self.vocab_start) * owned, self.weight) * owned.unsqueeze(-1)
        dist.all_reduce(y)
        return y


class ParallelLMHead(VocabParallelEmbedding):
    def __init__(self, num_embeddings: int, embedding_dim: int) -> None:
        super().__init__(num_embeddings, embedding_dim)
        self.packed_weight: torch.Tensor | None = None  # set by onednn_linear.pack_linear_weights

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor | None:
        """Logits for every row of ``hidden_states`` on rank 0 (None on the other ranks)."""
        logits = linear(hidden_states, self.weight, None, self.packed_weight)
        if self.tp_size == 1:
            return logits
        parts = [torch.empty_like(logits) for _ in range(self.tp_size)] if self.tp_rank == 0 else None
        dist.gather(logits, parts, dst=0)
        return torch.cat(parts, dim=-1) if self.tp_rank == 0 else None
