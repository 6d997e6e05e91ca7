"""Fault injection for the engine: a ``KeyboardInterrupt`` at the k-th line the engine executes, or from
the j-th event a trace sink receives, and the checks that the engine survived it.

``LineFault`` counts only lines of the engine's own modules (``ENGINE_FILES``), through ``sys.settrace``:
the interrupt lands where a learner's Ctrl-C could, between any two lines of the scheduler, the block
manager, the sequence, the scheduled batch, the step's transaction (checkpoint, rollback, abort), the
decision records, the teaching layer that says them as events, the runner edge and the model runner, the
engine loop, its shell (validation, held samples, queued aborts), ``LLM`` or its workload loop. ``SinkFault`` is a ``TraceRecorder`` sink that
raises from inside an ``emit``, as a console renderer interrupted while printing would.

``step_loop`` drives the engine as a learner's hand-written loop does, re-running whatever call was
interrupted. ``assert_consistent`` is the bookkeeping invariant every state between steps must satisfy;
``assert_empty`` is what an engine must look like after a failed ``generate()``.
"""

from __future__ import annotations

import sys
from collections import Counter
from types import FrameType
from typing import Any

from nanovllm_teach import llm as llm_module
from nanovllm_teach.engine import (batch, block_manager, decisions, frontend, llm_engine, model_runner, request_checks,
                                   runner, scheduler, sequence, teaching, transaction)
from nanovllm_teach.engine.block_manager import NO_HASH
from nanovllm_teach.engine.sequence import SequenceStatus
from nanovllm_teach.workload import arrivals

ENGINE_FILES = frozenset(module.__file__ for module in (
    llm_module, arrivals, frontend, request_checks, llm_engine, teaching, transaction, scheduler, block_manager,
    decisions, sequence, batch, runner, model_runner))


class InjectedFault(KeyboardInterrupt):
    """The interrupt raised by the injectors (a ``KeyboardInterrupt``, so it is handled like Ctrl-C)."""


class LineFault:
    """``with LineFault(at=k):`` raises ``InjectedFault`` at the k-th engine line executed inside the block;
    ``at=None`` only counts (``count``), to learn how many lines a run has."""

    def __init__(self, at: int | None = None) -> None:
        self.at = at
        self.count = 0
        self.where: str | None = None

    def _call(self, frame: FrameType, event: str, arg: Any):
        return self._line if frame.f_code.co_filename in ENGINE_FILES else None

    def _line(self, frame: FrameType, event: str, arg: Any):
        if event == "line":
            self.count += 1
            if self.count == self.at:
                self.where = f"{frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno}"
                raise InjectedFault(f"injected at {self.where}")  # also ends the tracing (Python unsets it)
        return self._line

    def __enter__(self) -> "LineFault":
        sys.settrace(self._call)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.settrace(None)


class SinkFault:
    """A trace sink that raises ``InjectedFault`` at the ``at``-th event it receives (None: never)."""

    def __init__(self) -> None:
        self.at: int | None = None
        self.count = 0
        self.where: str | None = None

    def arm(self, at: int | None) -> None:
        """Count events from 0 again and raise at the ``at``-th (None: only count)."""
        self.at, self.count, self.where = at, 0, None

    def disarm(self) -> None:
        """Raise no more; ``where`` still says where it did, if it did."""
        self.at = None

    def __call__(self, event) -> None:
        self.count += 1
        if self.count == self.at:
            self.where = event.event
            raise InjectedFault(f"injected by a sink at {event.event}")


def assert_consistent(llm) -> None:
    """The queues, the accepted sequences and every reference count agree; the prefix cache names only
    blocks that hold what it says."""
    sched = llm.scheduler
    bm = sched.block_manager
    queued = list(sched.waiting) + list(sched.running)
    assert len(queued) == len(set(map(id, queued))), "a sequence is queued twice"
    assert {s.seq_id for s in queued} == set(sched.accepted), "a sequence is accepted but in no queue (or the reverse)"
    assert all(s.status == SequenceStatus.WAITING for s in sched.waiting)
    assert all(s.status == SequenceStatus.RUNNING for s in sched.running)
    for k, seq in enumerate(sched.waiting):
        if k > 0 or not seq.block_table:
            assert not seq.block_table and seq.num_cached_tokens == 0, f"waiting {seq} holds blocks"
    for seq in sched.running:
        assert seq.num_cached_tokens == seq.num_tokens - 1, f"running {seq} is missing K/V"
        assert seq.num_blocks - len(seq.block_table) in (0, 1), f"running {seq} has a wrong block table"
    counts = Counter(b for seq in queued for b in seq.block_table)
    assert [b.ref_count for b in bm.blocks] == [counts[b.block_id] for b in bm.blocks], "wrong reference counts"
    assert len(bm.free_block_ids) == len(set(bm.free_block_ids)), "a block is twice in the free list"
    assert set(bm.free_block_ids) == {b.block_id for b in bm.blocks if b.ref_count == 0}
    assert bm.used_block_ids == set(counts)
    for h, block_id in bm.hash_to_block_id.items():
        assert bm.blocks[block_id].hash == h, f"the prefix cache maps a hash to block {block_id}, which lost it"
        assert h != NO_HASH


def assert_empty(llm) -> None:
    """No request left, every block free (the reference counts and the free list checked by
    ``assert_consistent`` against the tables, not rebuilt from them)."""
    bm = llm.scheduler.block_manager
    assert llm.is_finished(), "requests are still queued"
    assert bm.num_free_blocks == bm.num_blocks, "KV blocks are still held"
    assert all(b.ref_count == 0 for b in bm.blocks), "a reference count is not 0"
    assert_consistent(llm)


class NoFault:
    """Stands in for a fault: ``with NoFault():`` does nothing."""

    def __enter__(self) -> "NoFault":
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def step_loop(llm, prompts, params, fault: LineFault | None = None) -> tuple[list[list[int]], int]:
    """``add_request`` every request, then ``step()`` until done; an interrupted call is made again, as a
    learner re-running the cell would, after checking the engine is consistent. ``fault`` is armed until
    it fires. Returns the outputs in request order and how many interrupts hit."""
    todo = list(zip(prompts, params))
    ids: list[int] = []
    outputs: dict[int, list[int]] = {}
    interrupts = 0
    while todo or not llm.is_finished():
        try:
            with fault if fault is not None and not interrupts else NoFault():
                if todo:
                    ids.append(llm.add_request(*todo[0]))
                else:
                    outputs.update(llm.step()[0])
        except InjectedFault:
            interrupts += 1
            assert_consistent(llm)
            continue
        if len(ids) > len(prompts) - len(todo):
            todo.pop(0)
    return [outputs[i] for i in ids], interrupts
