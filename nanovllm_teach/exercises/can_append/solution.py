"""Reference solution of ``can_append``: ``BlockManager.can_append`` and ``BlockManager.may_append``."""

from __future__ import annotations

from nanovllm_teach.engine.block_manager import BlockManager
from nanovllm_teach.engine.decisions import Allocated
from nanovllm_teach.engine.sequence import Sequence


def can_append(bm: BlockManager, seq: Sequence) -> bool:
    # The newest token is counted in seq.num_tokens already; it needs a new block only if it is the first
    # token of one, that is when the blocks the tokens need outnumber the blocks the sequence holds.
    needs_new_block = seq.num_blocks > len(seq.block_table)
    return not needs_new_block or bm.num_free_blocks > 0


def may_append(bm: BlockManager, seq: Sequence) -> Allocated | None:
    if seq.num_blocks == len(seq.block_table):
        return None  # the newest token fits in the last block
    block_id = bm.take_free_block()
    seq.block_table.append(block_id)
    return Allocated(seq.seq_id, [block_id], [], 0, bm.num_free_blocks)
