"""Resources layer: what the scheduler and the block manager decided, as plain records. Pure Python, no torch.

Every choice the resources layer makes is one of these records, returned to whoever asked for it, in the
order it was made: the block manager hands blocks out (``Allocated``) and takes them back (``Freed``); the
scheduler preempts a sequence (``Preempted``) and finishes one (``Finished``); a caller takes a request out
(``Aborted``). ``Scheduler.schedule()`` returns the step's batch with the decisions it took on the way, as
vLLM's scheduler returns its ``SchedulerOutput``; ``Scheduler.postprocess()`` returns the finishes and the
blocks they gave back. Who runs in the step, and how many tokens each computes, is the ``ScheduledBatch``
itself (``engine/batch.py``).

A record says what was decided, nothing more: the orchestration layer turns it into TEACHING events
(``engine/teaching.py``), reading anything else a learner should see (a sequence's length, its
``max_tokens``) from the sequence itself; the grader compares those events.

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
    """A running sequence gave way to ``needed_by``, which needed a block: it waits to be recomputed. Its
    blocks went back just before (the ``Freed`` record ahead of this one)."""

    seq_id: int
    needed_by: int
    num_tokens: int  # its length when preempted: what its recompute will prefill again


class Finished(msgspec.Struct, frozen=True):
    """A sequence is done: ``reason`` is eos, length or max_model_len (the scheduler's), or stop (the
    request's own stop strings or token ids, which the orchestration layer checks)."""

    seq_id: int
    reason: str
    token_id: int  # the token that finished it


class Aborted(msgspec.Struct, frozen=True):
    """A request was taken out of the engine by its caller, from the state it was in."""

    seq_id: int
    from_status: str


Decision = Allocated | Freed | Preempted | Finished | Aborted
