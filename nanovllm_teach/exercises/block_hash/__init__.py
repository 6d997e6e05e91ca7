"""Exercise ``block_hash``: the chained prefix-cache hash.

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference.
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.engine.block_manager import NO_HASH
from nanovllm_teach.exercises.engine_grading import EngineExercise
from nanovllm_teach.exercises.pieces import Piece, is_int
from nanovllm_teach.exercises.workloads import SHARED_PREFIXES, TIGHT_CACHE


def _check_hash(args: tuple[Any, ...], result: Any) -> str | None:
    if not is_int(result):
        return f"returned {type(result).__name__} {result!r}: a block hash must be an int"
    if result == NO_HASH:
        return f"returned {result}, which the block manager reserves for 'no hash' (NO_HASH)"
    return None


EXERCISE = EngineExercise(
    "block_hash", "The prefix-cache hash chain", "block_manager.compute_block_hash",
    ("compute_block_hash",),
    ("Equal tokens after different prefixes hold different K/V. What must go into the hash besides this "
     "block's tokens?",
     "Feed the hasher the previous block's hash first (as 8 bytes, unless it is NO_HASH), then the token "
     "ids as bytes (array('q', token_ids).tobytes()); return h.intdigest()."),
    (Piece("compute_block_hash", "nanovllm_teach.engine.block_manager:compute_block_hash", _check_hash),),
    (SHARED_PREFIXES, TIGHT_CACHE))
