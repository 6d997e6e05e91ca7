"""Exercise ``can_allocate``: may a waiting sequence be admitted now, and how much of it is cached?

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference.
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.exercises.engine_grading import EngineExercise
from nanovllm_teach.exercises.pieces import Piece, is_int
from nanovllm_teach.exercises.workloads import PREFIX_REUSE, SHARED_PREFIXES, TIGHT_CACHE


def _check_cached_blocks(args: tuple[Any, ...], result: Any) -> str | None:
    bm, seq = args
    if not is_int(result) or not -1 <= result < max(seq.num_blocks, 1):
        return (f"returned {result!r} for seq {seq.seq_id} ({seq.num_tokens} tokens in {seq.num_blocks} blocks): "
                f"it must return -1 (it does not fit) or the number of its leading blocks that are cached, "
                f"an int from 0 to {seq.num_blocks - 1} (its last token is always computed)")
    return None


EXERCISE = EngineExercise(
    "can_allocate", "Admission's question: does it fit, and how much of it is cached?", "BlockManager.can_allocate",
    ("can_allocate",),
    ("Two questions in one: how many of the sequence's leading full blocks are already in the cache (a hash "
     "names each full block, chained to the one before), and are enough blocks free for the rest? Which "
     "token must always be computed, whatever the cache holds?",
     "Walk i from 0 while i < (seq.num_tokens - 1) // bm.block_size: h = compute_block_hash(seq.block(i), h) "
     "from h = NO_HASH; stop at the first block whose hash is not in bm.hash_to_block_id or whose "
     "bm.blocks[...].token_ids differ from seq.block(i). With prefix caching off, nothing is cached. The "
     "blocks needed are seq.num_blocks minus the hits, plus each hit nobody holds (ref_count 0: it leaves "
     "the free list); compare with bm.num_free_blocks."),
    (Piece("can_allocate", "nanovllm_teach.engine.block_manager:BlockManager.can_allocate", _check_cached_blocks),),
    (PREFIX_REUSE, SHARED_PREFIXES, TIGHT_CACHE))
