"""Reference solution of ``schedule_decode``: the decode half of ``Scheduler.schedule``."""

from __future__ import annotations

from nanovllm_teach.engine.decisions import Decision
from nanovllm_teach.engine.scheduler import Scheduler
from nanovllm_teach.engine.sequence import Sequence


def schedule_decode(scheduler: Scheduler) -> tuple[list[Sequence], list[Decision]]:
    scheduled: list[Sequence] = []
    decisions: list[Decision] = []  # what preempt and may_append decided: the engine reports it
    bm = scheduler.block_manager
    while scheduler.running and len(scheduled) < scheduler.max_num_seqs:
        seq = scheduler.running.popleft()
        while not bm.can_append(seq):
            if scheduler.running:
                # First come, first served: the sequence at the tail of running (the latest one admitted,
                # whatever it has computed) gives way to the older one.
                decisions += scheduler.preempt(scheduler.running.pop(), needed_by=seq)
            else:
                # Nobody left to take a block from: this sequence waits and is recomputed later.
                decisions += scheduler.preempt(seq, needed_by=seq)
                break
        else:
            seq.num_scheduled_tokens = 1
            allocated = bm.may_append(seq)
            if allocated is not None:
                decisions.append(allocated)
            scheduled.append(seq)
    # The scheduled sequences go back to the head of running, in their order, for the next step.
    scheduler.running.extendleft(reversed(scheduled))
    return scheduled, decisions
