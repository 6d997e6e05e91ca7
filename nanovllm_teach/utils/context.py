"""Execution layer: the per-step attention metadata every attention layer reads.

The model runner builds one ``Context`` per forward pass (flattened sequence boundaries, where each new
token's K/V goes in the cache, which blocks each sequence owns) and publishes it with ``set_context``.
Every ``Attention`` layer reads it with ``get_context`` instead of receiving it through every
``forward`` signature of the model. What a backend derives from these fields (an order, gather indices,
masks) is the same for every layer, so the first layer computes it and ``once_per_step`` keeps it for the
others. Emits no events.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Hashable

import torch


@dataclass
class Context:
    """What the attention layers need to know about the batch of one forward pass.

    Prefill: ``cu_seqlens_q``/``cu_seqlens_k`` mark where each sequence starts in the flattened batch
    (``k`` is longer than ``q`` when a cached prefix is read back from the KV cache, in which case
    ``block_tables`` is set). Decode: every sequence contributes exactly one query token and reads all its
    keys through ``block_tables`` up to ``context_lens``.
    """

    is_prefill: bool = False
    cu_seqlens_q: torch.Tensor | None = None
    cu_seqlens_k: torch.Tensor | None = None
    max_seqlen_q: int = 0
    max_seqlen_k: int = 0
    slot_mapping: torch.Tensor | None = None
    context_lens: torch.Tensor | None = None
    block_tables: torch.Tensor | None = None
    _derived: dict[Hashable, Any] = field(default_factory=dict, repr=False, compare=False)

    def once_per_step(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """``build()`` the first time ``key`` is asked for in this step; the same object every later time.
        A new step is a new ``Context``, so nothing derived from one step's batch leaks into the next."""
        if key not in self._derived:
            self._derived[key] = build()
        return self._derived[key]


_CONTEXT = Context()


def get_context() -> Context:
    return _CONTEXT


def set_context(context: Context) -> None:
    global _CONTEXT
    _CONTEXT = context


def reset_context() -> None:
    set_context(Context())
