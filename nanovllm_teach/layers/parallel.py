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

from nanovllm_teach.i18n import Text, say

# A learner builds a rank in a notebook with acting_as, and a model's sizes come from its config.json.
BAD_WORLD_SIZE = Text(en="world_size must be a positive int, not {world_size!r}",
                      zh="world_size 必须是正整数，而不是 {world_size!r}")
BAD_RANK = Text(en="rank must be an int from 0 to {last}, not {rank!r}", zh="rank 必须是 0 到 {last} 之间的 int，而不是 {rank!r}")
NOT_DIVISIBLE = Text(en="{what}={numerator} is not divisible by tensor_parallel_size={denominator}",
                     zh="{what}={numerator} 不能被 tensor_parallel_size={denominator} 整除")

_ACTING: ContextVar[tuple[int, int] | None] = ContextVar("acting_as", default=None)


@contextmanager
def acting_as(rank: int, world_size: int) -> Iterator[None]:
    """Layers built inside this block take their place as rank ``rank`` of ``world_size``."""
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(say(BAD_WORLD_SIZE, world_size=world_size))
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world_size:
        raise ValueError(say(BAD_RANK, last=world_size - 1, rank=rank))
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
        raise ValueError(say(NOT_DIVISIBLE, what=what, numerator=numerator, denominator=denominator))
    return numerator // denominator
