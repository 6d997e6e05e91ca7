"""Exercise ``schedule_prefill``: admitting prompts: the token budget, chunking and the prefix cache.

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference.
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.exercises.engine_grading import EngineExercise
from nanovllm_teach.exercises.pieces import Piece, not_sequences
from nanovllm_teach.exercises.workloads import CACHED_UNDER_BUDGET, SHARED_PREFIXES, SMALL_BUDGET, TIGHT_CACHE


def _check_scheduled(args: tuple[Any, ...], result: Any) -> str | None:
    return not_sequences(result)


EXERCISE = EngineExercise(
    "schedule_prefill", "Admitting prompts: the token budget, chunking and the prefix cache",
    "Scheduler.schedule_prefill", ("schedule_prefill",),
    ("Three limits stop admission: the sequence cap, the step's token budget, and free blocks "
     "(can_allocate). Which tokens of a sequence does this step compute, once its cached blocks are counted?",
     "Loop while waiting is not empty and fewer than max_seqs are scheduled. A sequence with blocks computes "
     "num_tokens - num_cached_tokens; a new one first asks can_allocate (-1: stop) and computes num_tokens - "
     "cached_blocks * block_size. A later sequence that does not fit stops the loop; the first computes "
     "min(needed, remaining). allocate, set num_scheduled_tokens; if its prompt is then complete, it is RUNNING: "
     "popleft it and append it to running."),
    (Piece("schedule_prefill", "nanovllm_teach.engine.scheduler:Scheduler.schedule_prefill", _check_scheduled),),
    (SMALL_BUDGET, CACHED_UNDER_BUDGET, SHARED_PREFIXES, TIGHT_CACHE))
