"""Exercise ``schedule_decode`` — decode scheduling with preemption.

When nothing is waiting to be prefilled, every engine step is a *decode* step: each running sequence
computes exactly one more token. Your job is to choose those sequences, and to make room when the KV cache
is full. This is the second half of ``Scheduler.schedule`` (``nanovllm_teach/engine/scheduler.py``: ``schedule_decode``).

The rules, in order:

1. Take sequences from the *head* of ``scheduler.running`` (the oldest first) until it is empty or you have
   ``scheduler.max_num_seqs`` of them.
2. A sequence may run only if ``scheduler.block_manager.can_append(seq)``: its newest token may start a new
   KV block, and then a free block must exist. While it cannot run, free a block by *preempting* the
   newest sequence, the one at the *tail* of ``running``: ``scheduler.preempt(victim, needed_by=seq)``.
   (Preemption by recompute: the victim gives back its blocks and returns to the waiting queue.)
   If nobody is left to preempt, preempt ``seq`` itself and move on.
3. A sequence that may run is scheduled for one token (its ``num_scheduled_tokens``) and gets its new
   block, if it needs one, from ``scheduler.block_manager.may_append``.
4. At the end, the scheduled sequences are back at the head of ``running``, in the order they were
   taken, and you return them in that order.

``scheduler.running`` is a ``collections.deque``: ``popleft()`` takes the oldest, ``pop()`` the newest.

Grade it: ``nanovllm-teach grade schedule_decode this_file.py``. The grader runs the real engine with your
function in place of ``Scheduler.schedule_decode`` and compares its decisions, as TEACHING
events, with the reference's.
Stuck? ``hint("schedule_decode", 1)`` says where to look, ``hint("schedule_decode", 2)`` how.
"""

from __future__ import annotations

from nanovllm_teach.engine.scheduler import Scheduler
from nanovllm_teach.engine.sequence import Sequence


def schedule_decode(scheduler: Scheduler) -> list[Sequence]:
    """The sequences that decode one token each in this step, in order (never empty)."""
    raise NotImplementedError
