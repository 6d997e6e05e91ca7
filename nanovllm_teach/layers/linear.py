"""Execution layer: linear layers that know how to shard themselves for tensor parallelism.

Every weight carries a ``weight_loader(param, loaded_weight[, shard_id])`` attribute: the checkpoint
loader hands it the full Hugging Face tensor and the layer copies the slice this rank owns. Qwen3's
separate ``q/k/v_proj`` land in one packed ``qkv_proj`` and ``gate/up_proj`` in one ``gate_up_proj``
so that each becomes a single matrix multiply.

- ColumnParallelLinear: output features split across ranks (no communication).
- RowParallelLinear: input features split; partial sums are all-reduced.
- MergedColumnParallelLinear / QKVParallelLinear: several column-parallel outputs packed side by side.

Each layer multiplies through ``onednn_linear.linear``: ``F.linear``, or oneDNN once the model runner has
packed the layer's weight (``packed_weight``; ``linear_backend="onednn"``, the default on x86-64 CPUs).
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn

from nanovllm_teach.layers.onednn_linear import linear
from nanovllm_teach.layers.parallel import divide, tp_rank, tp_size


class LinearBase(nn.Module):
    def __init__(self, input_size: int, output_size: int, bias: bool, tp_dim: int | None) -> None:
        super().__init__()
        self.tp_dim = tp_dim
        self.tp_rank = tp_rank()
        self.tp_size = tp_size()
        self.weight = nn.Parameter(torch.empty(output_size, input_size), requires_grad=False)
        self.weight.weight_loader = self.weight_loader
        if bias:
            self.bias = nn.Parameter(torch.empty(output_size), requires_grad=False)
            self.bias.weight_loader = self.weight_loader
        else:
            self.register_parameter("bias", None)
        self.packed_weight: torch.Tensor | None = None  # set by onednn_linear.pack_linear_weights

    def weight_loader(self, param: nn.Parameter, loaded_weight: torch.Tensor) -> None:
        if self.tp_dim is None:
            param.data.copy_(loaded_weight)
            return
        shard = param.data.size(self.tp_dim)
        param.data.copy_(loaded_weight.narrow(self.tp_dim, self.tp_rank * shard, shard))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias, self.packed_weight)


class ReplicatedLinear(LinearBase):
    def __init__(self, input_size: int, output_size: int, bias: bool = False) -> None:
        super().__init__(input_size, output_size, bias, tp_dim=None)


class ColumnParallelLinear(LinearBase):
    def __init__(self, input_size: int, output_size: int, bias: bool = False) -> None:
        super().__init__(input_size, divide(output_size, tp_size(), "output_size"), bias, tp_dim=0)


class MergedColumnParallelLinear(ColumnParallelLinear):
    """Several column-parallel projections of the same input stored as one matrix (gate and up)."""

    def __init__(self, input_size: int, output_sizes: list[int], bias: bool = False) -> None:
        self.output_sizes = output_sizes
        super().__init__(input_size, sum(output_sizes), bias)

    def weight_loader(self, param: nn.Parameter, loaded_weight: torch.Tensor, shard_id: int) -> None:
        offset = sum(self.output_sizes[:shard_id]) // self.tp_size
        size = self.output_sizes[shard_id] // self.tp_size
        target = param.data.narrow(0, offset, size)
        target.copy_(loaded_weight.narrow(0, self.tp_rank * size, size))


class QKVParallelLinear(ColumnParallelLinear):
    """Query, key and value projections packed as ``[q | k | v]``; each rank owns whole heads."""

    def __init__(self, hidden_size: int, head_size: int, total_num_heads: int,
                 total_num_kv_heads: int, bias: bool = False) -> None:
        size = tp_size()
        self.head_size = head_size
        self.num_heads = divide(total_num_heads, size, "num_attention_heads")
        self.num_kv_heads = divide(total_num_kv_heads, size, "num_key_value_heads")
        output_size = (total_num_heads + 2 * total_num_kv_heads) * head_size
        super().__init__(hidden_size, output_size, bias)

    def weight_loader(self, param: nn.Parameter, loaded_weight: torch.Tensor, shard_id: str) -> None:
        q_size = self.num_heads * self.head_size
        kv_size = self.num_kv_heads * self.head_size
        offset, size = {"q": (0, q_size), "k": (q_size, kv_size), "v": (q_size + kv_size, kv_size)}[shard_id]
        target = param.data.narrow(0, offset, size)
        target.copy_(loaded_weight.narrow(0, self.tp_rank * size, size))


class RowParallelLinear(LinearBase):
    def __init__(self, input_size: int, output_size: int, bias: bool = False) -> None:
        super().__init__(divide(input_size, tp_size(), "input_size"), output_size, bias, tp_dim=1)

    def weight_loader(self, param: nn.Parameter, loaded_weight: torch.Tensor) -> None:
        if param.dim() == 1:
            # The bias is added once, on rank 0, so the all-reduce does not count it tp_size times.
            param.data.copy_(loaded_weight if self.tp_rank == 0 else torch.zeros_like(loaded_weight))
            return
        super().weight_loader(param, loaded_weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        if self.tp_size > 1:
            dist.all_reduce(y)
        return y
