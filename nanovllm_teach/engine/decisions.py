"""Resources layer: what the scheduler and the block manager decided, as plain records. Pure Python, no torch.

Every choice the resources layer makes is one of these records, in the order it was made: the block manager
hands blocks out (``Allocated``) and takes them back (``Freed``); the scheduler preempts a sequence
(``Preempted``) and finishes one (``Finished``). Who runs in the step, and how many tokens each computes,
is the ``ScheduledBatch`` itself (``engine/batch.py``). The records go to ``Scheduler.decisions``, the
log of the latest step, which ``schedule()`` starts afresh; the orchestration layer turns them into
TEACHING events (``engine/teaching.py``), the grader compares them, and undoing an interrupted step reads
which blocks it handed out.

The same records describe the clean-up after an interrupt (``engine/transaction.py``): the blocks an
aborted request gave back, and the blocks that changed hands when a step was undone.

Emits no events.
"""

from __future__ import annotations

import msgspec


class Allocated(msgspec.Struct, frozen=True):
    """A sequence was given blocks: on admission (its cached prefix shared, the rest fresh), or one fresh
    block when its newest token starts a new one."""

    seq_id: int
    block_ids: list[int]  # fresh blocks taken from the free list: their old K/V may be overwritten
    shared_block_ids: list[int]  # cached prefix blocks it now shares (one more holder each)
    num_cached_tokens: int  # tokens whose K/V the shared blocks already hold
    num_free_blocks: int  # free blocks after


class Freed(msgspec.Struct, frozen=True):
    """A sequence gave its blocks back; the blocks nobody else holds are free again (their hash is kept)."""

    seq_id: int
    block_ids: list[int]  # its whole block table
    freed_block_ids: list[int]  # the blocks no sequence holds any more
    num_free_blocks: int  # free blocks after


class Preempted(msgspec.Struct, frozen=True):
    """A running sequence gave way to ``needed_by``, which needed a block: it waits to be recomputed."""

    seq_id: int
    needed_by: int
    num_tokens: int  # its length when preempted
    num_freed_blocks: int
    num_free_blocks: int  # free blocks after
    num_completion_tokens: int
    max_tokens: int


class Finished(msgspec.Struct, frozen=True):
    """A sequence is done: ``reason`` is eos, length or max_model_len."""

    seq_id: int
    reason: str
    token_id: int  # the token that finished it
    num_completion_tokens: int
    max_tokens: int


class Aborted(msgspec.Struct, frozen=True):
    """A request was taken out of the engine by the caller (``LLMEngine.abort_request``, or a failed
    ``generate``), from the state it was in."""

    seq_id: int
    from_status: str
    num_completion_tokens: int
    max_tokens: int


Decision = Allocated | Freed | Preempted | Finished | Aborted
