"""Reference solution of ``schedule_prefill``: the prefill half of ``Scheduler.schedule``."""

from __future__ import annotations

from nanovllm_teach.engine.decisions import Allocated
from nanovllm_teach.engine.scheduler import Scheduler
from nanovllm_teach.engine.sequence import Sequence, SequenceStatus


def schedule_prefill(scheduler: Scheduler) -> tuple[list[Sequence], list[Allocated]]:
    scheduled: list[Sequence] = []
    allocations: list[Allocated] = []  # what allocate decided: the engine reports it
    max_seqs = scheduler.admission_cap()
    bm = scheduler.block_manager
    num_batched_tokens = 0
    while scheduler.waiting and len(scheduled) < max_seqs:
        seq = scheduler.next_waiting()
        remaining = scheduler.max_num_batched_tokens - num_batched_tokens
        if remaining == 0:
            break
        if seq.block_table:
            # Part-way through a chunked prompt: its blocks are held, the rest of the prompt is computed.
            num_cached_blocks = None
            num_tokens = seq.num_tokens - seq.num_cached_tokens
        else:
            num_cached_blocks = bm.can_allocate(seq)
            if num_cached_blocks == -1:
                break  # no room: first come, first served, so nobody behind it goes first
            num_tokens = seq.num_tokens - num_cached_blocks * bm.block_size
        if num_tokens > remaining and scheduled:
            break  # only the first sequence of a step may be chunked
        if num_cached_blocks is not None:
            allocations.append(bm.allocate(seq, num_cached_blocks))
        seq.num_scheduled_tokens = min(num_tokens, remaining)
        num_batched_tokens += seq.num_scheduled_tokens
        if seq.num_cached_tokens + seq.num_scheduled_tokens == seq.num_tokens:
            seq.status = SequenceStatus.RUNNING
            scheduler.waiting.popleft()
            scheduler.running.append(seq)
        scheduled.append(seq)
    return scheduled, allocations
