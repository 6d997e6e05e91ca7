"""Exercise ``can_append``: can a sequence grow by one token, and its new block.

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference.
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.engine.block_manager import logged
from nanovllm_teach.exercises.engine_grading import EngineExercise
from nanovllm_teach.exercises.pieces import Piece
from nanovllm_teach.exercises.workloads import LATE_ARRIVALS, TIGHT_CACHE


def _check_bool(args: tuple[Any, ...], result: Any) -> str | None:
    return None if isinstance(result, bool) else f"returned {result!r}: it must return True or False"


EXERCISE = EngineExercise(
    "can_append", "Growing a sequence by one token: can_append / may_append", "BlockManager.can_append, may_append",
    ("can_append", "may_append"),
    ("Only the token that starts a new block needs a free block. What tells you that seq's tokens need more "
     "blocks than it holds?",
     "Compare seq.num_blocks with len(seq.block_table). may_append does the same test, then takes a block "
     "with bm.take_free_block(), appends it and returns the Allocated record of it (None when no block was "
     "needed)."),
    (Piece("can_append", "nanovllm_teach.engine.block_manager:BlockManager.can_append", _check_bool), Piece("may_append", "nanovllm_teach.engine.block_manager:BlockManager.may_append", wrap=logged)),
    (TIGHT_CACHE, LATE_ARRIVALS))
