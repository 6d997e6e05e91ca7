"""Orchestration layer: what the engine decided and did, turned into TEACHING events — one place per kind.

The scheduler and the block manager decide and return what they decided (``engine/decisions.py``); the
runner returns what it did (``engine/runner.py``'s ``RunReport``). ``LLMEngine`` hands each of these to
``Teaching``, which says them in the trace's vocabulary (``trace/events.py``), in the order they happened,
reading what else a learner should see (a sequence's completion so far, its ``max_tokens``) from the
sequences themselves:

- the engine's start (ENGINE_INIT, ENGINE_READY) and each request's arrival (REQUEST_ENQUEUE);
- a prefill: for each sequence of the batch, the cached prefix it reuses (PREFIX_CACHE_HIT), the blocks it
  takes (BLOCK_ALLOCATE), and WAITING → RUNNING once its whole prompt is computed; then SCHEDULE_PREFILL;
- a decode: each preemption (BLOCK_FREE, PREEMPT, RUNNING → WAITING) and each new block (BLOCK_ALLOCATE),
  then SCHEDULE_DECODE;
- the run: what the runner reports it did (PREPARE_PREFILL_TENSORS or PREPARE_DECODE_TENSORS, RUN_MODEL or
  CUDAGRAPH_REPLAY, SAMPLE);
- postprocess: each finish (RUNNING → FINISHED, then BLOCK_FREE); then STEP_DONE;
- an abort (BLOCK_FREE, then REQUEST_ABORT and → FINISHED per request) and an undone step (BLOCK_FREE and
  BLOCK_ALLOCATE, reason ``step_rolled_back``), reported once the state is settled.

With recording off every method returns at its first line.

Emits: ENGINE_INIT, ENGINE_READY, REQUEST_ENQUEUE, SCHEDULE_PREFILL, SCHEDULE_DECODE, PREFIX_CACHE_HIT,
BLOCK_ALLOCATE, BLOCK_FREE, PREEMPT, PREPARE_PREFILL_TENSORS, PREPARE_DECODE_TENSORS, RUN_MODEL,
CUDAGRAPH_REPLAY, SAMPLE, STATE_TRANSITION, REQUEST_ABORT, STEP_DONE.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from msgspec import UNSET

from nanovllm_teach.engine.batch import ScheduledBatch
from nanovllm_teach.engine.decisions import Aborted, Allocated, Decision, Finished, Freed, Preempted
from nanovllm_teach.engine.runner import RunOutput
from nanovllm_teach.engine.scheduler import Scheduler
from nanovllm_teach.engine.sequence import Sequence
from nanovllm_teach.trace.events import (BlockAllocate, BlockFree, CudagraphReplay, EngineInit, EngineReady, Preempt,
                                         PrefixCacheHit, PrepareDecodeTensors, PreparePrefillTensors, RequestAbort,
                                         RequestEnqueue, RunModel, Sample, ScheduleDecode, SchedulePrefill,
                                         StateTransition, StepDone)
from nanovllm_teach.trace.recorder import Recorder

if TYPE_CHECKING:  # the config imports torch; the teaching layer only reads its numbers
    from nanovllm_teach.config import Config


class Teaching:
    def __init__(self, recorder: Recorder) -> None:
        self.rec = recorder

    def engine_starting(self, config: Config) -> None:
        """The settings the engine starts with, before the runner is built."""
        if not self.rec.enabled:
            return
        self.rec.record("bootstrap", "engine_starting", EngineInit(
            max_num_batched_tokens=config.max_num_batched_tokens, max_num_seqs=config.max_num_seqs,
            max_model_len=config.max_model_len, block_size=config.kvcache_block_size,
            tp_size=config.tensor_parallel_size, model=config.model_name,
            enable_prefix_caching=config.enable_prefix_caching, policy=config.scheduling_policy,
            attention_backend=config.attention_backend))

    def engine_ready(self, config: Config, eos_token_id: int) -> None:
        """The engine as built: its KV cache sized, its scheduler waiting for requests."""
        if not self.rec.enabled:
            return
        self.rec.record("init", "engine_ready", EngineReady(
            num_kvcache_blocks=config.num_kvcache_blocks, eos_token_id=eos_token_id,
            attention_backend=config.attention_backend, device=config.device))

    def enqueued(self, seq: Sequence, scheduler: Scheduler, now_s: float) -> None:
        """A request joined the waiting queue at ``now_s``, having arrived at ``seq.arrival_time``."""
        if not self.rec.enabled:
            return
        waited_s = now_s - seq.arrival_time
        self.rec.record("ingress", "new_request_waiting", RequestEnqueue(
            seq_id=seq.seq_id, prompt_len=seq.num_prompt_tokens, max_tokens=seq.max_tokens,
            temperature=seq.temperature, ignore_eos=seq.ignore_eos, seed=seq.seed,
            waiting_len=len(scheduler.waiting),
            since_arrival_ms=round(waited_s * 1e3, 6) if waited_s > 0 else UNSET))

    def scheduled(self, batch: ScheduledBatch, decisions: list[Decision], scheduler: Scheduler,
                  decode_step_index: int) -> None:
        """The step ``schedule()`` chose, and the decisions it took on the way (``decisions``);
        ``decode_step_index``: how many decode steps the engine ran before this one."""
        if not self.rec.enabled:
            return
        waiting_len, running_len = len(scheduler.waiting), len(scheduler.running)
        seqs = scheduler.accepted
        if batch.is_prefill:
            allocations = {d.seq_id: d for d in decisions if isinstance(d, Allocated)}
            for entry in batch.seqs:
                allocation = allocations.pop(entry.seq_id, None)
                if allocation is not None:
                    self._allocated(allocation, "prefill", "admit_sequence")
                if not entry.is_prompt_chunk:
                    self._transition(seqs[entry.seq_id], "WAITING", "RUNNING", "prefill", "prefill_scheduled")
            for allocation in allocations.values():  # given blocks without being scheduled (a learner's bug)
                self._allocated(allocation, "prefill", "admit_sequence")
            tokens = [len(s.token_ids) for s in batch.seqs]
            self.rec.record("prefill", "waiting_admitted", SchedulePrefill(
                seq_ids=batch.seq_ids, num_scheduled_tokens=tokens, chunked=[s.is_prompt_chunk for s in batch.seqs],
                num_batched_tokens=sum(tokens), scheduled=len(tokens), waiting_len=waiting_len,
                running_len=running_len))
            return
        freed = None  # a preemption's blocks: the record just before it
        for decision in decisions:
            if isinstance(decision, Freed):
                self._freed(decision, "decode", "preempted")
                freed = decision
            elif isinstance(decision, Preempted):
                self.rec.record("decode", "no_free_block_for_decode", Preempt(
                    seq_id=decision.seq_id, freed_blocks=len(freed.block_ids) if freed else 0,
                    needed_by=decision.needed_by, num_tokens=decision.num_tokens,
                    num_free_blocks=freed.num_free_blocks if freed else scheduler.block_manager.num_free_blocks))
                self._transition(seqs[decision.seq_id], "RUNNING", "WAITING", "decode", "preempted")
            elif isinstance(decision, Allocated):
                self._allocated(decision, "decode", "decode_needs_new_block")
        self.rec.record("decode", "no_prefill_ready", ScheduleDecode(
            seq_ids=batch.seq_ids, num_batched_tokens=len(batch.seqs), scheduled=len(batch.seqs),
            decode_step_index=decode_step_index, waiting_len=waiting_len, running_len=running_len))

    def ran(self, batch: ScheduledBatch, ran: RunOutput) -> None:
        """What the runner reports it did with ``batch``: the tensors it prepared, how the model ran, what it
        sampled."""
        if not self.rec.enabled:
            return
        report = ran.report
        if report is None:  # a runner that was not asked (the engine was not recording when it ran)
            return
        seqs, num_tokens = batch.seqs, batch.num_batched_tokens
        if not report.inputs:
            pass  # a runner with no tensors (the simulator) prepares none
        elif batch.is_prefill:
            self.rec.record("prefill", "flatten_prompts", PreparePrefillTensors(
                n_seqs=len(seqs), flat_tokens=num_tokens,
                has_block_tables=report.inputs.get("block_tables") is not None, **report.inputs))
        else:
            self.rec.record("decode", "one_token_per_sequence", PrepareDecodeTensors(
                batch_size=len(seqs), **report.inputs))
        phase, forward = "prefill" if batch.is_prefill else "decode", report.forward
        predicted = forward.predicted or {}
        if forward.mode == "graph":
            self.rec.record(phase, "replay_decode_graph", CudagraphReplay(
                mode="graph", batch_size=forward.batch_size, num_tokens=num_tokens,
                graph_batch_size=forward.graph_batch_size, **predicted))
        else:
            self.rec.record(phase, f"{forward.mode}_forward", RunModel(
                mode=forward.mode, batch_size=forward.batch_size, num_tokens=num_tokens,
                graph_batch_size=None, eager_reason=forward.eager_reason, **predicted))
        filters = {} if report.num_kept is None else dict(
            top_k=[s.top_k for s in seqs], top_p=[s.top_p for s in seqs], min_p=[s.min_p for s in seqs],
            num_kept=report.num_kept)
        self.rec.record(phase, "sample_next_tokens", Sample(
            seq_ids=batch.seq_ids, temperatures=[s.temperature for s in seqs], token_ids=ran.token_ids, **filters))

    def step_done(self, batch: ScheduledBatch, seqs: list[Sequence], scheduler: Scheduler, num_tokens: int,
                  latency_ms: float, runner_stats: Mapping[str, object]) -> None:
        """The step's end: its size, how long it took, who finished, and the cache and queues after it."""
        if not self.rec.enabled:
            return
        bm = scheduler.block_manager
        phase = "prefill" if batch.is_prefill else "decode"
        self.rec.record(phase, "step_complete", StepDone(
            phase=phase, latency_ms=round(latency_ms, 3), num_tokens_stat=num_tokens,
            num_batched_tokens=batch.num_batched_tokens, batch_size=len(seqs), seq_ids=batch.seq_ids,
            finished=[s.seq_id for s in seqs if s.is_finished], used_blocks=bm.num_blocks - bm.num_free_blocks,
            free_blocks=bm.num_free_blocks, waiting_len=len(scheduler.waiting), running_len=len(scheduler.running),
            **runner_stats))

    def postprocessed(self, decisions: list[Decision], seqs: list[Sequence]) -> None:
        """The finishes ``postprocess()`` decided, each followed by the blocks it gave back; ``seqs``: the
        step's sequences."""
        if not self.rec.enabled:
            return
        by_id = {seq.seq_id: seq for seq in seqs}
        for decision in decisions:
            if isinstance(decision, Finished):
                self._transition(by_id[decision.seq_id], "RUNNING", "FINISHED", "postprocess",
                                 f"finished_{decision.reason}", token_id=decision.token_id,
                                 finish_reason=decision.reason)
            elif isinstance(decision, Freed):
                self._freed(decision, "postprocess", "finished")

    def aborted(self, decisions: list[Decision], seqs: Mapping[int, Sequence]) -> None:
        """What ``transaction.abort`` gave back, then each aborted request (``seqs``: them, by ``seq_id``)."""
        if not self.rec.enabled:
            return
        for decision in decisions:
            if isinstance(decision, Freed):
                self._freed(decision, "egress", "aborted")
            elif isinstance(decision, Aborted):
                seq = seqs[decision.seq_id]
                self.rec.record("egress", "request_aborted", RequestAbort(
                    seq_id=decision.seq_id, num_completion_tokens=seq.num_completion_tokens))
                self._transition(seq, decision.from_status, "FINISHED", "egress", "aborted")

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

    def _transition(self, seq: Sequence, was: str, to: str, phase: str, reason: str, **finish: object) -> None:
        self.rec.record(phase, reason, StateTransition(
            seq_id=seq.seq_id, from_=was, to=to, num_completion_tokens=seq.num_completion_tokens,
            max_tokens=seq.max_tokens, **finish))
