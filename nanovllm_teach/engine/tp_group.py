"""Execution layer: the process group the ranks of a tensor-parallel engine share (``torch.distributed``).

Every rank's model runner joins it at start-up (``join``: NCCL between GPUs, gloo between CPU processes),
and the ranks agree on facts through it (``all_ranks``: each rank's value, in rank order, as rank 0 reports
them and as the KV budget takes the tightest). With one rank there is no group and nothing to gather.

Emits no events.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

# How long a rank waits in a collective (or for the others to join the group) before it gives up: short,
# so that a stuck rank becomes an error instead of gloo's default 30-minute hang.
TP_TIMEOUT = timedelta(seconds=60)


def join(device: torch.device, dist_init: str | None, world_size: int, rank: int) -> str:
    """Join the group that meets at ``dist_init`` (``tcp://host:port``); returns its backend."""
    # Rank 0 chooses the address and hands it to every rank (engine/tp_workers.py): none is only a bug.
    assert dist_init is not None, "tensor_parallel_size > 1 needs dist_init, the tcp:// address the ranks meet at"
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, init_method=dist_init, world_size=world_size, rank=rank, timeout=TP_TIMEOUT)
    return backend


def all_ranks(value: Any, world_size: int) -> list[Any]:
    """``value`` from every rank, in rank order. A collective: every rank calls it at the same point."""
    if world_size == 1:
        return [value]
    values: list[Any] = [None] * world_size
    dist.all_gather_object(values, value)
    return values
