"""Execution layer: where this process sits in the tensor-parallel group.

Layers ask here instead of reading ``torch.distributed`` directly, so that a model built in a plain
process (tests, notebooks, the single-process engine) behaves as rank 0 of a group of one, and one built
inside ``acting_as(rank, world_size)`` as that rank of that group, without a process group: how a single
process sees what every rank of a group holds (the ``tp_slice`` exercise's grader, the tests). Such a model
only loads weights; a forward pass of it would wait for ranks that do not exist.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

import torch.distributed as dist

_ACTING: ContextVar[tuple[int, int] | None] = ContextVar("acting_as", default=None)


@contextmanager
def acting_as(rank: int, world_size: int) -> Iterator[None]:
    """Layers built inside this block take their place as rank ``rank`` of ``world_size``."""
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a positive int, not {world_size!r}")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(f"rank must be an int from 0 to {world_size - 1}, not {rank!r}")
    token = _ACTING.set((rank, world_size))
    try:
        yield
    finally:
        _ACTING.reset(token)


def tp_rank() -> int:
    acting = _ACTING.get()
    if acting is not None:
        return acting[0]
    return dist.get_rank() if dist.is_initialized() else 0


def tp_size() -> int:
    acting = _ACTING.get()
    if acting is not None:
        return acting[1]
    return dist.get_world_size() if dist.is_initialized() else 1


def divide(numerator: int, denominator: int, what: str) -> int:
    if numerator % denominator != 0:
        raise ValueError(f"{what}={numerator} is not divisible by tensor_parallel_size={denominator}")
    return numerator // denominator
