"""Exercise ``scheduling_policy`` — design a scheduling policy: who is admitted next.

Every step, the scheduler (``Scheduler.schedule_prefill`` in ``nanovllm_teach/engine/scheduler.py``) admits
waiting sequences into the step's prefill while its token budget (``max_num_batched_tokens``), the sequence
cap and the free KV blocks allow. *Which* waiting sequence goes next is the policy's choice: the function
``choose_next`` in the same file. The engine's own policy is first come, first served (FCFS): it returns 0,
the head of the queue, the oldest arrival.

There is no single right answer here. The grader runs your policy in the real scheduler, on the simulated
engine (Qwen3-0.6B on an NVIDIA L4, predicted step times: the same numbers on every machine), on three
workloads of requests arriving over time with prompts from 40 to 1900 tokens, and compares the latency
with FCFS's on the same workloads. On each workload your policy passes when:

- its mean time to first token (TTFT) is at least 20% below FCFS's, and
- no request waits for its first token longer than 1.5 times FCFS's slowest request (nobody starves),

and every request finishes. The verdict is a table per workload, FCFS against yours.

The contract: ``choose_next(waiting)`` gets the waiting queue, a ``collections.deque`` of ``Sequence``
objects in arrival order (a preempted sequence is put back at the head), never empty, and returns the
*index* of the sequence to admit next (an int, ``0 <= index < len(waiting)``). Do not change ``waiting``
itself: the scheduler moves the one you chose. It is called once per admission, so several times a step.
What a sequence knows that may help: ``seq_id`` (grows with arrival order), ``num_prompt_tokens``,
``num_tokens``, ``num_preemptions``. It must be a function of what it is given (no clocks, no randomness).

Example: with three waiting sequences whose prompts have 900, 30 and 400 tokens (seq_ids 4, 5, 6), FCFS
returns 0 and "last come, first served" returns 2. Think about what each choice makes the others wait for,
and then about the request that every choice you make passes over.

Grade it: ``nanovllm-teach grade scheduling_policy this_file.py`` (or ``check("scheduling_policy", choose_next)``).
Stuck? ``hint("scheduling_policy", 1)`` says where to look, ``hint("scheduling_policy", 2)`` how.
"""

from __future__ import annotations

from collections import deque

from nanovllm_teach.engine.sequence import Sequence


def choose_next(waiting: deque[Sequence]) -> int:
    """The index in ``waiting`` of the sequence to admit next."""
    raise NotImplementedError
