"""Exercise ``schedule_prefill`` — admitting waiting requests: the token budget, chunking, the prefix cache.

Every engine step first tries to *prefill*: to admit requests from ``scheduler.waiting`` and compute their
prompts. This is the first half of ``Scheduler.schedule`` (``nanovllm_teach/engine/scheduler.py``). Your
function chooses the sequences of this prefill step and how many tokens each computes.

The rules, in order, for as long as ``waiting`` is not empty and fewer than ``max_seqs`` are scheduled:

1. The sequence to consider is ``scheduler.next_waiting()`` (the head of ``waiting`` once the
   scheduling policy has had its say). Only ``max_num_batched_tokens`` tokens may be computed in the whole
   step: stop when none of the budget is left.
2. A sequence that holds blocks already (``seq.block_table`` is not empty) is part-way through its prompt:
   it computes the rest, ``seq.num_tokens - seq.num_cached_tokens``. Any other sequence needs its blocks
   first: ``bm.can_allocate(seq)`` says how many of its leading blocks are already in the prefix cache, or
   -1 when there are not enough free blocks (then stop: it waits for the next step, and so does everyone
   behind it). The cached blocks' tokens are not computed again.
3. Only the first sequence of a step may be *chunked*: if the tokens a later one needs do not fit in what
   is left of the budget, stop. The first one computes as much as fits.
4. An admitted sequence gets its blocks from the block manager's ``allocate``, given the number of
   cached blocks (it also counts the cached tokens), and its ``num_scheduled_tokens``. If that finishes its prompt, it is ``SequenceStatus.RUNNING``
   and leaves ``waiting`` (from the head) for the tail of ``running``. A chunked sequence stays at the head
   of ``waiting``.

Return the scheduled sequences in the order you took them (an empty list when nobody could be admitted:
the step is then a decode). ``max_seqs``, from ``scheduler.admission_cap()``, is ``max_num_seqs`` or
fewer under the static policy; ``bm`` is ``scheduler.block_manager``, whose blocks hold ``bm.block_size``
tokens each.

Example: budget 16, block size 4, ``waiting`` holds A (10 tokens, its first 8 cached) and B (12 tokens,
nothing cached). A computes 2 tokens and moves to ``running``; B needs 12 but only 14 remain, so B fits and
moves too: 14 tokens this step. Had B needed 15, it would have waited for the next step.

Grade it: ``nanovllm-teach grade schedule_prefill this_file.py``. The grader runs the real engine with your
function in place of ``Scheduler.schedule_prefill`` and compares its decisions, as TEACHING
events, with the reference's.
Stuck? ``hint("schedule_prefill", 1)`` says where to look, ``hint("schedule_prefill", 2)`` how.
"""

from __future__ import annotations

from nanovllm_teach.engine.scheduler import Scheduler
from nanovllm_teach.engine.sequence import Sequence, SequenceStatus


def schedule_prefill(scheduler: Scheduler) -> list[Sequence]:
    """The sequences this prefill step computes, each with its ``num_scheduled_tokens`` set."""
    raise NotImplementedError
