"""Orchestration layer: the resources layer's decisions, turned into TEACHING events — one place per kind.

The scheduler and the block manager decide and write down what they decided (``engine/decisions.py``);
``LLMEngine`` hands each step's batch and records to ``Teaching``, which says them in the trace's vocabulary
(``trace/events.py``), in the order they were made:

- a prefill: for each sequence of the batch, the cached prefix it reuses (PREFIX_CACHE_HIT), the blocks it
  takes (BLOCK_ALLOCATE), and WAITING → RUNNING once its whole prompt is computed; then SCHEDULE_PREFILL;
- a decode: each preemption (BLOCK_FREE, PREEMPT, RUNNING → WAITING) and each new block (BLOCK_ALLOCATE),
  then SCHEDULE_DECODE;
- postprocess: each finish (RUNNING → FINISHED, then BLOCK_FREE);
- an abort (BLOCK_FREE, then REQUEST_ABORT and → FINISHED per request) and an undone step (BLOCK_FREE and
  BLOCK_ALLOCATE, reason ``step_rolled_back``), reported once the state is settled.

With recording off every method returns at its first line.

Emits: SCHEDULE_PREFILL, SCHEDULE_DECODE, PREFIX_CACHE_HIT, BLOCK_ALLOCATE, BLOCK_FREE, PREEMPT,
STATE_TRANSITION, REQUEST_ABORT.
"""

from __future__ import annotations

from nanovllm_teach.engine.batch import ScheduledBatch
from nanovllm_teach.engine.decisions import Aborted, Allocated, Decision, Finished, Freed, Preempted
from nanovllm_teach.engine.scheduler import Scheduler
from nanovllm_teach.trace.events import (BlockAllocate, BlockFree, Preempt, PrefixCacheHit, RequestAbort,
                                         ScheduleDecode, SchedulePrefill, StateTransition)
from nanovllm_teach.trace.recorder import Recorder


class Teaching:
    def __init__(self, recorder: Recorder) -> None:
        self.rec = recorder

    def scheduled(self, batch: ScheduledBatch, decisions: list[Decision], scheduler: Scheduler) -> None:
        """The step ``schedule()`` chose, and the decisions it took on the way (``decisions``)."""
        if not self.rec.enabled:
            return
        waiting_len, running_len = len(scheduler.waiting), len(scheduler.running)
        if batch.is_prefill:
            allocations = {d.seq_id: d for d in decisions if isinstance(d, Allocated)}
            for entry in batch.seqs:
                allocation = allocations.pop(entry.seq_id, None)
                if allocation is not None:
                    self._allocated(allocation, "prefill", "admit_sequence")
                if not entry.is_prompt_chunk:
                    seq = scheduler.accepted[entry.seq_id]
                    self._transition(entry.seq_id, "WAITING", "RUNNING", seq.num_completion_tokens, seq.max_tokens,
                                     "prefill", "prefill_scheduled")
            for allocation in allocations.values():  # given blocks without being scheduled (a learner's bug)
                self._allocated(allocation, "prefill", "admit_sequence")
            tokens = [len(s.token_ids) for s in batch.seqs]
            self.rec.record("prefill", "waiting_admitted", SchedulePrefill(
                seq_ids=batch.seq_ids, num_scheduled_tokens=tokens, chunked=[s.is_prompt_chunk for s in batch.seqs],
                num_batched_tokens=sum(tokens), scheduled=len(tokens), waiting_len=waiting_len,
                running_len=running_len))
            return
        for decision in decisions:
            if isinstance(decision, Freed):
                self._freed(decision, "decode", "preempted")
            elif isinstance(decision, Preempted):
                self.rec.record("decode", "no_free_block_for_decode", Preempt(
                    seq_id=decision.seq_id, freed_blocks=decision.num_freed_blocks, needed_by=decision.needed_by,
                    num_tokens=decision.num_tokens, num_free_blocks=decision.num_free_blocks))
                self._transition(decision.seq_id, "RUNNING", "WAITING", decision.num_completion_tokens,
                                 decision.max_tokens, "decode", "preempted")
            elif isinstance(decision, Allocated):
                self._allocated(decision, "decode", "decode_needs_new_block")
        self.rec.record("decode", "no_prefill_ready", ScheduleDecode(
            seq_ids=batch.seq_ids, num_batched_tokens=len(batch.seqs), scheduled=len(batch.seqs),
            decode_step_index=scheduler.num_decode_steps - 1, waiting_len=waiting_len, running_len=running_len))

    def postprocessed(self, decisions: list[Decision]) -> None:
        """The finishes ``postprocess()`` decided, each followed by the blocks it gave back."""
        if not self.rec.enabled:
            return
        for decision in decisions:
            if isinstance(decision, Finished):
                self._transition(decision.seq_id, "RUNNING", "FINISHED", decision.num_completion_tokens,
                                 decision.max_tokens, "postprocess", f"finished_{decision.reason}",
                                 token_id=decision.token_id, finish_reason=decision.reason)
            elif isinstance(decision, Freed):
                self._freed(decision, "postprocess", "finished")

    def aborted(self, decisions: list[Decision]) -> None:
        """What ``transaction.abort`` gave back, then each aborted request."""
        if not self.rec.enabled:
            return
        for decision in decisions:
            if isinstance(decision, Freed):
                self._freed(decision, "egress", "aborted")
            elif isinstance(decision, Aborted):
                self.rec.record("egress", "request_aborted", RequestAbort(
                    seq_id=decision.seq_id, num_completion_tokens=decision.num_completion_tokens))
                self._transition(decision.seq_id, decision.from_status, "FINISHED", decision.num_completion_tokens,
                                 decision.max_tokens, "egress", "aborted")

    def rolled_back(self, changes: list[Decision]) -> None:
        """Who holds which block after ``transaction.rollback``, as a replay of the trace needs to know."""
        if not self.rec.enabled:
            return
        for change in changes:
            if isinstance(change, Freed):
                self._freed(change, "egress", "step_rolled_back")
            else:
                self._allocated(change, "egress", "step_rolled_back")

    def _allocated(self, allocation: Allocated, phase: str, reason: str) -> None:
        if allocation.shared_block_ids:
            self.rec.record(phase, "prefix_blocks_reused", PrefixCacheHit(
                seq_id=allocation.seq_id, num_cached_blocks=len(allocation.shared_block_ids),
                num_cached_tokens=allocation.num_cached_tokens, block_ids=allocation.shared_block_ids))
        self.rec.record(phase, reason, BlockAllocate(
            seq_id=allocation.seq_id, block_ids=allocation.block_ids, shared_block_ids=allocation.shared_block_ids,
            num_free_blocks=allocation.num_free_blocks))

    def _freed(self, freed: Freed, phase: str, reason: str) -> None:
        self.rec.record(phase, reason, BlockFree(
            seq_id=freed.seq_id, block_ids=freed.block_ids, freed_block_ids=freed.freed_block_ids,
            num_free_blocks=freed.num_free_blocks))

    def _transition(self, seq_id: int, was: str, to: str, num_completion_tokens: int, max_tokens: int, phase: str,
                    reason: str, **finish: object) -> None:
        self.rec.record(phase, reason, StateTransition(
            seq_id=seq_id, from_=was, to=to, num_completion_tokens=num_completion_tokens, max_tokens=max_tokens,
            **finish))
