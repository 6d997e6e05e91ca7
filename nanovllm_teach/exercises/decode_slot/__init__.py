"""Exercise ``decode_slot``: where a decode token's K/V goes, the slot mapping.

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference.
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.exercises.engine_grading import EngineExercise
from nanovllm_teach.exercises.pieces import Piece, is_int
from nanovllm_teach.exercises.workloads import LATE_ARRIVALS, TIGHT_CACHE
from nanovllm_teach.trace.diff import DECISION_EVENTS


def _check_slot(args: tuple[Any, ...], result: Any) -> str | None:
    if not is_int(result):
        return f"returned {type(result).__name__} {result!r}: a cache slot is an int (use //, not /)"
    return None


EXERCISE = EngineExercise(
    "decode_slot", "Where a decode token's K/V goes: the slot mapping", "model_runner.decode_slot",
    ("decode_slot",),
    ("Which position does the newest token have, counting from 0? Which logical block holds that position?",
     "Logical block position // block_size is physical block seq.block_table[that]; the slot is that "
     "block's first slot plus the offset position % block_size."),
    (Piece("decode_slot", "nanovllm_teach.engine.model_runner:decode_slot", _check_slot),),
    (TIGHT_CACHE, LATE_ARRIVALS),
    ("PREPARE_DECODE_TENSORS",) + DECISION_EVENTS)
