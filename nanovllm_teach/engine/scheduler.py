"""Resources layer: the ``Scheduler`` decides, every step, which sequences run and whether the step is a
prefill or a decode. This is where continuous batching happens. Pure Python, no torch.

``schedule()`` returns the step as a ``ScheduledBatch`` (``engine/batch.py``), plain data for the model
runner; ``postprocess(batch, token_ids)`` takes the runner's answer back:

1. Prefill first. Admit sequences from the head of ``waiting`` while the step's token budget
   (``max_num_batched_tokens``), the sequence cap (``max_num_seqs``) and the free KV blocks allow. Who is
   next is the scheduling policy's choice, ``choose_next`` (first come, first served: the head). Only the
   queue head may be *chunked*: if its prompt does not fit in the remaining budget it computes part of it
   now and stays at the head for the next step.
2. Otherwise decode every running sequence one token. When a sequence needs a new block and none is free,
   preempt from the tail of ``running`` (the newest arrivals give way) by recompute: its blocks are freed and
   it goes back to the head of ``waiting``.

``postprocess()`` appends each sampled token, finishes a sequence on EOS (unless ``ignore_eos``), on
``max_tokens`` or at ``max_model_len``, and frees its blocks.

``accepted`` holds every sequence added and not yet finished or aborted, wherever it is — in a queue, or
in the middle of moving between them — and is what ``abort`` and ``rollback`` trust:

- ``abort(seq_ids)`` takes sequences out of the engine and frees exactly their blocks, whatever state an
  exception left behind (the queues and the block counts are rebuilt from ``accepted``); it is idempotent.
- ``checkpoint()`` before a step and ``rollback(checkpoint)`` if the step raised put every sequence back
  as it was before the step. A sequence whose blocks were handed to another one during the step (it was
  preempted, and its K/V may be overwritten) goes back as preempted instead: waiting, to be recomputed.

An event that fails (a sink, a full disk) is one more exception: inside a step the rollback undoes it,
and ``abort`` settles the whole state before it emits anything, so its clean-up is never left half-done.

A ``static`` policy is available for comparison: a batch is admitted together and nobody joins until all
of it has finished — the static batching that continuous batching replaces.

Emits: SCHEDULE_PREFILL, SCHEDULE_DECODE, PREEMPT, STATE_TRANSITION, REQUEST_ABORT, BLOCK_FREE and
BLOCK_ALLOCATE for an abort or a rollback (and, through the block manager, PREFIX_CACHE_HIT, BLOCK_ALLOCATE,
BLOCK_FREE).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass

from nanovllm_teach.engine.batch import ScheduledBatch
from nanovllm_teach.engine.block_manager import BlockManager
from nanovllm_teach.engine.sequence import Sequence, SequenceState, SequenceStatus
from nanovllm_teach.settings import POLICIES
from nanovllm_teach.trace.events import (BlockAllocate, BlockFree, Preempt, RequestAbort, ScheduleDecode,
                                         SchedulePrefill, StateTransition)
from nanovllm_teach.trace.recorder import NullRecorder, Recorder

def choose_next(waiting: deque[Sequence]) -> int:
    """Which waiting sequence is admitted next, as its index in ``waiting`` (which it must not change).

    First come, first served: the head, which is the oldest arrival, or a preempted sequence (put back at
    the head). The scheduling-policy exercise replaces this function; a policy may use anything a sequence
    knows (``seq_id`` grows with arrival order, ``num_tokens``, ``num_prompt_tokens``, ``num_preemptions``).
    """
    return 0


@dataclass(frozen=True)
class Checkpoint:
    """The scheduler before a step: enough to undo the step if it does not complete."""

    waiting: tuple[Sequence, ...]
    running: tuple[Sequence, ...]
    states: dict[Sequence, SequenceState]  # every accepted sequence
    num_decode_steps: int
    num_handouts: int


class Scheduler:
    def __init__(self, *, max_num_seqs: int, max_num_batched_tokens: int, max_model_len: int, eos: int,
                 num_kvcache_blocks: int, block_size: int, enable_prefix_caching: bool = True,
                 policy: str = "continuous", recorder: Recorder | None = None) -> None:
        if policy not in POLICIES:
            raise ValueError(f"scheduling policy must be one of {POLICIES}, got {policy!r}")
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.max_model_len = max_model_len
        self.eos = eos
        self.policy = policy
        self.rec = recorder or NullRecorder()
        self.block_manager = BlockManager(num_kvcache_blocks, block_size, enable_prefix_caching, self.rec)
        self.waiting: deque[Sequence] = deque()
        self.running: deque[Sequence] = deque()
        self.accepted: dict[int, Sequence] = {}
        self.num_decode_steps = 0

    def is_finished(self) -> bool:
        return not self.accepted

    def add(self, seq: Sequence) -> None:
        self.accepted[seq.seq_id] = seq
        self.waiting.append(seq)

    def _transition(self, seq: Sequence, to: SequenceStatus, phase: str, reason: str, **stats) -> None:
        was, seq.status = seq.status, to
        if self.rec.enabled:
            self.rec.record(phase, reason, StateTransition(
                seq_id=seq.seq_id, from_=was.value, to=to.value, num_completion_tokens=seq.num_completion_tokens,
                max_tokens=seq.max_tokens, **stats))

    def schedule(self) -> ScheduledBatch:
        """This step's batch: a prefill if any waiting sequence can be admitted, else a decode."""
        scheduled = self._schedule_prefill()
        if scheduled:
            if self.rec.enabled:
                tokens = [s.num_scheduled_tokens for s in scheduled]
                self.rec.record("prefill", "waiting_admitted", SchedulePrefill(
                    seq_ids=[s.seq_id for s in scheduled], num_scheduled_tokens=tokens,
                    chunked=[s.status == SequenceStatus.WAITING for s in scheduled], num_batched_tokens=sum(tokens),
                    scheduled=len(scheduled), waiting_len=len(self.waiting), running_len=len(self.running)))
            return ScheduledBatch.of(scheduled, is_prefill=True)
        scheduled = self._schedule_decode()
        if self.rec.enabled:
            self.rec.record("decode", "no_prefill_ready", ScheduleDecode(
                seq_ids=[s.seq_id for s in scheduled], num_batched_tokens=len(scheduled), scheduled=len(scheduled),
                decode_step_index=self.num_decode_steps, waiting_len=len(self.waiting),
                running_len=len(self.running)))
        self.num_decode_steps += 1
        return ScheduledBatch.of(scheduled, is_prefill=False)

    def _schedule_prefill(self) -> list[Sequence]:
        scheduled: list[Sequence] = []
        max_seqs = self._admission_cap()
        num_batched_tokens = 0
        bm = self.block_manager
        while self.waiting and len(scheduled) < max_seqs:
            seq = self._next_waiting()
            remaining = self.max_num_batched_tokens - num_batched_tokens
            if remaining == 0:
                break
            if seq.block_table:  # the head's prompt is part-way through a chunked prefill
                num_cached_blocks = None
                num_tokens = seq.num_tokens - seq.num_cached_tokens
            else:
                num_cached_blocks = bm.can_allocate(seq)
                if num_cached_blocks == -1:
                    break
                num_tokens = seq.num_tokens - num_cached_blocks * bm.block_size
            if num_tokens > remaining and scheduled:
                break  # only the queue head may be chunked
            if num_cached_blocks is not None:
                bm.allocate(seq, num_cached_blocks)
            seq.num_scheduled_tokens = min(num_tokens, remaining)
            num_batched_tokens += seq.num_scheduled_tokens
            if seq.num_cached_tokens + seq.num_scheduled_tokens == seq.num_tokens:
                self.waiting.popleft()
                self._transition(seq, SequenceStatus.RUNNING, "prefill", "prefill_scheduled")
                self.running.append(seq)
            scheduled.append(seq)
        return scheduled

    def _admission_cap(self) -> int:
        """How many sequences this prefill may take: ``max_num_seqs``; under the static policy none while a
        batch is in flight (it drains before anyone joins), except its own chunked head."""
        if self.policy == "static" and self.running:
            return 1 if self.waiting and self.waiting[0].block_table else 0
        return self.max_num_seqs

    def _next_waiting(self) -> Sequence:
        """The waiting sequence to consider next, moved to the head of ``waiting``: the policy's choice
        (``choose_next``), unless the head is a chunked prompt, which goes on first (its K/V is half-written)."""
        if not self.waiting[0].block_table:
            self._move_to_head(choose_next(self.waiting))
        return self.waiting[0]

    def _move_to_head(self, index: int) -> None:
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(self.waiting):
            raise ValueError(f"choose_next must return an index into the {len(self.waiting)} waiting sequences, "
                             f"got {index!r}")
        if index:
            seq = self.waiting[index]
            del self.waiting[index]
            self.waiting.appendleft(seq)

    def _schedule_decode(self) -> list[Sequence]:
        scheduled: list[Sequence] = []
        bm = self.block_manager
        while self.running and len(scheduled) < self.max_num_seqs:
            seq = self.running.popleft()
            while not bm.can_append(seq):
                if self.running:
                    self.preempt(self.running.pop(), needed_by=seq)
                else:
                    self.preempt(seq, needed_by=seq)
                    break
            else:
                seq.num_scheduled_tokens = 1
                bm.may_append(seq)
                scheduled.append(seq)
        assert scheduled, "decode scheduled nothing: a request larger than the KV cache was admitted"
        self.running.extendleft(reversed(scheduled))
        return scheduled

    def preempt(self, seq: Sequence, needed_by: Sequence) -> None:
        """Give ``seq``'s blocks to others; it will be prefilled again from its tokens (recompute)."""
        num_blocks = len(seq.block_table)
        self.block_manager.deallocate(seq, "preempted")
        seq.num_preemptions += 1
        if self.rec.enabled:
            self.rec.record("decode", "no_free_block_for_decode", Preempt(
                seq_id=seq.seq_id, freed_blocks=num_blocks, needed_by=needed_by.seq_id, num_tokens=seq.num_tokens,
                num_free_blocks=self.block_manager.num_free_blocks))
        self._transition(seq, SequenceStatus.WAITING, "decode", "preempted")
        self.waiting.appendleft(seq)

    def postprocess(self, batch: ScheduledBatch, token_ids: list[int]) -> list[Sequence]:
        """Record the step's results: new K/V is now cached, sampled tokens are appended, finished
        sequences leave and free their blocks. Returns the batch's sequences, in its order."""
        bm = self.block_manager
        seqs = [self.accepted[s.seq_id] for s in batch.seqs]
        for seq, token_id in zip(seqs, token_ids, strict=True):
            bm.hash_blocks(seq)
            seq.num_cached_tokens += seq.num_scheduled_tokens
            seq.num_scheduled_tokens = 0
            if seq.num_cached_tokens < seq.num_tokens:
                continue  # a chunk of the prompt: its sampled token is meaningless
            seq.append_token(token_id)
            if not seq.ignore_eos and token_id == self.eos:
                seq.finish_reason = "eos"
            elif seq.num_completion_tokens == seq.max_tokens:
                seq.finish_reason = "length"
            elif seq.num_tokens >= self.max_model_len:
                seq.finish_reason = "max_model_len"
            else:
                continue
            del self.accepted[seq.seq_id]
            self.running.remove(seq)
            self._transition(seq, SequenceStatus.FINISHED, "postprocess", f"finished_{seq.finish_reason}",
                             token_id=token_id, finish_reason=seq.finish_reason)
            bm.deallocate(seq, "finished")
        return seqs

    # ---- interrupts ----------------------------------------------------------------------------

    def abort(self, seq_ids: Iterable[int]) -> list[Sequence]:
        """Take these sequences out of the engine, wherever they are, and free exactly their blocks; ids
        not accepted (unknown, finished, already aborted) are skipped. Returns the sequences aborted."""
        aborted = [self.accepted[i] for i in dict.fromkeys(seq_ids) if i in self.accepted]
        held = {seq: list(seq.block_table) for seq in self.accepted.values()}
        for seq in aborted:
            del self.accepted[seq.seq_id]
        self._settle()
        was = [seq.status for seq in aborted]
        for seq in aborted:
            seq.status, seq.finish_reason = SequenceStatus.FINISHED, "aborted"
            seq.block_table, seq.num_cached_tokens, seq.num_scheduled_tokens = [], 0, 0
        if self.rec.enabled:  # the state is settled; only now the events, which may fail
            self._report_blocks(held, "aborted", frees=[(seq, held[seq]) for seq in aborted])
            for seq, status in zip(aborted, was):
                self.rec.record("egress", "request_aborted", RequestAbort(
                    seq_id=seq.seq_id, num_completion_tokens=seq.num_completion_tokens))
                self.rec.record("egress", "aborted", StateTransition(
                    seq_id=seq.seq_id, from_=status.value, to=SequenceStatus.FINISHED.value,
                    num_completion_tokens=seq.num_completion_tokens, max_tokens=seq.max_tokens))
        return aborted

    def _settle(self) -> list[int]:
        """Make the queues and the block counts agree with ``accepted``; returns the blocks freed."""
        for queue in (self.waiting, self.running):
            kept = [seq for seq in queue if self.accepted.get(seq.seq_id) is seq]
            queue.clear()
            queue.extend(kept)
        return self.block_manager.recount(seq.block_table for seq in self.accepted.values())

    def checkpoint(self) -> Checkpoint:
        return Checkpoint(tuple(self.waiting), tuple(self.running),
                          {seq: seq.state() for seq in self.accepted.values()}, self.num_decode_steps,
                          self.block_manager.num_handouts)

    def rollback(self, checkpoint: Checkpoint) -> None:
        """Undo a step that raised: its sequences, queues and blocks go back to ``checkpoint``. Then, the
        state settled, the blocks that changed hands are reported (``step_rolled_back``)."""
        held = {seq: list(seq.block_table) for seq in checkpoint.states}  # at the moment of the failure
        for seq, state in checkpoint.states.items():
            seq.restore(state)
        overwritten = self.block_manager.handed_out_since(checkpoint.num_handouts)
        stale = {seq for seq in checkpoint.states if not overwritten.isdisjoint(seq.block_table)}
        for seq in stale:  # preempted during the step: it stays preempted, its K/V will be recomputed
            seq.status, seq.block_table, seq.num_cached_tokens = SequenceStatus.WAITING, [], 0
        self.accepted = {seq.seq_id: seq for seq in checkpoint.states}
        self.running.clear()
        self.running.extend(seq for seq in checkpoint.running if seq not in stale)
        self.waiting.clear()
        self.waiting.extend([seq for seq in checkpoint.running if seq in stale] + list(checkpoint.waiting))
        self.num_decode_steps = checkpoint.num_decode_steps
        self._settle()
        if self.rec.enabled:
            self._report_rollback(held)

    def _report_rollback(self, held: dict[Sequence, list[int]]) -> None:
        """What a replay of the trace needs to know who holds which block after the rollback."""
        self._report_blocks(
            held, "step_rolled_back",
            frees=[(seq, [b for b in before if b not in seq.block_table]) for seq, before in held.items()],
            takes=[(seq, [b for b in seq.block_table if b not in before]) for seq, before in held.items()])

    def _report_blocks(self, held: dict[Sequence, list[int]], reason: str,
                       frees: list[tuple[Sequence, list[int]]],
                       takes: list[tuple[Sequence, list[int]]] = ()) -> None:
        """BLOCK_FREE for each (sequence, blocks it gave back), then BLOCK_ALLOCATE for each (sequence,
        blocks it took), each with the free count a replay of the trace has after it. ``held``: every
        table before the change (the state itself is already settled). Called only while recording."""
        holders = Counter(block_id for table in held.values() for block_id in table)
        num_blocks = self.block_manager.num_blocks
        for seq, blocks in frees:
            if blocks:
                holders.subtract(blocks)
                self.rec.record("egress", reason, BlockFree(
                    seq_id=seq.seq_id, block_ids=blocks,
                    freed_block_ids=[b for b in reversed(blocks) if holders[b] == 0], num_free_blocks=num_blocks - sum(n > 0 for n in holders.values())))
        for seq, blocks in takes:
            if blocks:
                holders.update(blocks)
                self.rec.record("egress", reason, BlockAllocate(
                    seq_id=seq.seq_id, block_ids=blocks, shared_block_ids=[],
                    num_free_blocks=num_blocks - sum(n > 0 for n in holders.values())))
