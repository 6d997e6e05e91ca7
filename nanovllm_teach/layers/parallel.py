"""Execution layer: where this process sits in the tensor-parallel group.

Layers ask here instead of reading ``torch.distributed`` directly, so that a model built in a plain
process (tests, notebooks, the single-process engine) behaves as rank 0 of a group of one.
"""

from __future__ import annotations

import torch.distributed as dist


def tp_rank() -> int:
    return dist.get_rank() if dist.is_initialized() else 0


def tp_size() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def divide(numerator: int, denominator: int, what: str) -> int:
    if numerator % denominator != 0:
        raise ValueError(f"{what}={numerator} is not divisible by tensor_parallel_size={denominator}")
    return numerator // denominator
