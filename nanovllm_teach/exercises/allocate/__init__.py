"""Exercise ``allocate``: a new sequence's block table: shared prefix blocks and fresh ones.

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference.
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.engine.block_manager import logged
from nanovllm_teach.exercises.engine_grading import EngineExercise
from nanovllm_teach.exercises.pieces import Piece, is_int
from nanovllm_teach.exercises.workloads import PREFIX_REUSE, SHARED_PREFIXES, TIGHT_CACHE


def _check_allocation(args: tuple[Any, ...], result: Any) -> str | None:
    bm, seq, num_cached_blocks = args
    table = seq.block_table
    if not isinstance(table, list) or not all(is_int(b) and 0 <= b < bm.num_blocks for b in table):
        return (f"left seq {seq.seq_id} a block table {table!r}: it must be a list of block ids (ints from 0 to "
                f"{bm.num_blocks - 1})")
    if len(table) != seq.num_blocks or len(set(table)) != len(table):
        return (f"gave seq {seq.seq_id} the block table {table} for its {seq.num_tokens} tokens, which need "
                f"{seq.num_blocks} different blocks of {bm.block_size}")
    if any(bm.blocks[b].ref_count < 1 for b in table):
        return f"gave seq {seq.seq_id} blocks {table} and left some of them with no holder (ref_count 0)"
    if seq.num_cached_tokens != num_cached_blocks * bm.block_size:
        return (f"left seq.num_cached_tokens at {seq.num_cached_tokens!r}, but its {num_cached_blocks} cached "
                f"block(s) already hold the K/V of {num_cached_blocks * bm.block_size} tokens")
    return None


EXERCISE = EngineExercise(
    "allocate", "Admitting a sequence: shared prefix blocks and fresh ones", "BlockManager.allocate",
    ("allocate",),
    ("The first num_cached_blocks blocks are in the cache: which dict maps a block's hash to its block, and "
     "which hash does block i have? Each reused block gets one more holder; what must change for a block "
     "that had none (where does a freed block wait)?",
     "Walk i over the cached blocks with h = compute_block_hash(seq.block(i), h), from h = NO_HASH, and look "
     "h up in bm.hash_to_block_id. A hit whose ref_count is 0 moves from bm.free_block_ids to "
     "bm.used_block_ids; every hit's ref_count goes up by 1. The rest come from bm.take_free_block(). Then "
     "the block table (hits + fresh), num_cached_tokens, and return the Allocated record of it all."),
    (Piece("allocate", "nanovllm_teach.engine.block_manager:BlockManager.allocate", _check_allocation, logged),),
    (PREFIX_REUSE, SHARED_PREFIXES, TIGHT_CACHE))
