"""Execution layer: linear layers that know how to shard themselves for tensor parallelism.

Every weight carries a ``weight_loader(param, loaded_weight[, shard_id])`` attribute: the checkpoint
loader hands it the full Hugging Face tensor and the layer copies the slice this rank owns, where
``rank_slice`` (``layers/rank_slice.py``: the ``tp_slice`` exercise's point) says it goes. Qwen3's
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

from nanovllm_teach.layers import rank_slice  # looked up at each call: the tp_slice exercise replaces it
from nanovllm_teach.layers.onednn_linear import linear
from nanovllm_teach.layers.parallel import divide, tp_rank, tp_size

_KINDS = {0: "column", 1: "row"}  # by the dimension of the weight that is split across ranks


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
        self.load_part(param, loaded_weight, [loaded_weight.size(0)], 0)

    def load_part(self, param: nn.Parameter, loaded_weight: torch.Tensor, parts: list[int], part: int) -> None:
        """Copy this rank's slice of ``loaded_weight``, projection number ``part`` of those packed in this
        layer (output sizes ``parts``), into its place in ``param``."""
        taken = rank_slice.rank_slice(_KINDS[self.tp_dim], list(loaded_weight.shape), parts, part, self.tp_size,
                                      self.tp_rank)
        if taken is None:
            param.data.zero_()
            return
        dim, start, length, offset = taken
        param.data.narrow(dim, offset, length).copy_(loaded_weight.narrow(dim, start, length))

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
        self.load_part(param, loaded_weight, self.output_sizes, shard_id)


class QKVParallelLinear(ColumnParallelLinear):
    """Query, key and value projections packed as ``[q | k | v]``; each rank owns whole heads."""

    def __init__(self, hidden_size: int, head_size: int, total_num_heads: int,
                 total_num_kv_heads: int, bias: bool = False) -> None:
        size = tp_size()
        self.head_size = head_size
        self.num_heads = divide(total_num_heads, size, "num_attention_heads")
        self.num_kv_heads = divide(total_num_kv_heads, size, "num_key_value_heads")
        self.output_sizes = [total_num_heads * head_size] + [total_num_kv_heads * head_size] * 2
        super().__init__(hidden_size, sum(self.output_sizes), bias)

    def weight_loader(self, param: nn.Parameter, loaded_weight: torch.Tensor, shard_id: str) -> None:
        self.load_part(param, loaded_weight, self.output_sizes, "qkv".index(shard_id))


class RowParallelLinear(LinearBase):
    def __init__(self, input_size: int, output_size: int, bias: bool = False) -> None:
        super().__init__(divide(input_size, tp_size(), "input_size"), output_size, bias, tp_dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        if self.tp_size > 1:
            dist.all_reduce(y)
        return y
