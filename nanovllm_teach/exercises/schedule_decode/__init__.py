"""Exercise ``schedule_decode``: decode scheduling with preemption.

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference.
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.exercises.engine_grading import EngineExercise
from nanovllm_teach.exercises.pieces import Piece, not_sequences
from nanovllm_teach.exercises.workloads import LATE_ARRIVALS, SEQ_CAP, TIGHT_CACHE


def _check_schedule(args: tuple[Any, ...], result: Any) -> str | None:
    problem = not_sequences(result)
    if problem is None and not result:
        return ("returned an empty list: a decode step must run at least one sequence (when every other one "
                "is preempted, the last one left runs)")
    return problem


EXERCISE = EngineExercise(
    "schedule_decode", "Decode scheduling with preemption", "Scheduler.schedule_decode",
    ("schedule_decode",),
    ("Two queues' ends matter: which end of scheduler.running do you take the next sequence from, and which "
     "end gives way when blocks run out? Read Scheduler.preempt to see what preempting does.",
     "Loop while running is not empty and you have fewer than max_num_seqs; inside, loop while "
     "can_append(seq) says no: preempt running.pop() if anyone is left, else seq itself (and skip it). "
     "Scheduled sequences go back to the head of running, in order."),
    (Piece("schedule_decode", "nanovllm_teach.engine.scheduler:Scheduler.schedule_decode", _check_schedule),),
    (TIGHT_CACHE, SEQ_CAP, LATE_ARRIVALS))
