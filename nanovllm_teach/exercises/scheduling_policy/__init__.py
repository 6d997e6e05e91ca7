"""Exercise ``scheduling_policy``: design a scheduling policy, graded by the latency it achieves.

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference.
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.exercises.pieces import Piece, is_int
from nanovllm_teach.exercises.policy_grading import PolicyExercise
from nanovllm_teach.exercises.policy_workloads import POLICY_WORKLOADS


def _check_index(args: tuple[Any, ...], result: Any) -> str | None:
    (waiting,) = args
    if not is_int(result) or not 0 <= result < len(waiting):
        return (f"returned {result!r}: it must return the index (an int from 0 to {len(waiting) - 1}) of one of "
                f"the {len(waiting)} waiting sequences")
    return None


EXERCISE = PolicyExercise(
    "scheduling_policy", "Design a scheduling policy: who is admitted next", "scheduler.choose_next",
    ("choose_next",),
    ("Mean TTFT is a sum of waits: while one request's prefill runs, every request behind it waits. Which "
     "requests cost the others the least when they go first? Then look at the steady_stream row: who waits "
     "the longest under your policy, and why does nobody ever let it in?",
     "Admit the waiting sequence with the fewest prompt tokens (num_prompt_tokens) first, and add aging so "
     "that nobody is passed over forever: seq_id grows with arrival order, so the newest seq_id in waiting "
     "minus a sequence's seq_id counts the requests that arrived after it; once that count is large (a few "
     "dozen), let the oldest go first."),
    (Piece("choose_next", "nanovllm_teach.engine.scheduler:choose_next", _check_index),),
    tuple(POLICY_WORKLOADS.values()))

