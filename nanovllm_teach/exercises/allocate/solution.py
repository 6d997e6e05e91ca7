"""Reference solution of ``allocate``: ``BlockManager.allocate``, a new sequence's block table."""

from __future__ import annotations

from nanovllm_teach.engine.block_manager import NO_HASH, BlockManager, compute_block_hash
from nanovllm_teach.engine.decisions import Allocated
from nanovllm_teach.engine.sequence import Sequence


def allocate(bm: BlockManager, seq: Sequence, num_cached_blocks: int) -> Allocated:
    # The cached blocks are found the way can_allocate found them: by the chained hash of each leading block.
    hits: list[int] = []
    h = NO_HASH
    for i in range(num_cached_blocks):
        h = compute_block_hash(seq.block(i), h)
        hits.append(bm.hash_to_block_id[h])
    for block_id in hits:
        block = bm.blocks[block_id]
        if block.ref_count == 0:  # freed earlier, its K/V still there: it leaves the free list
            bm.free_block_ids.remove(block_id)
            bm.used_block_ids.add(block_id)
        block.ref_count += 1
    fresh = [bm.take_free_block() for _ in range(seq.num_blocks - num_cached_blocks)]
    seq.block_table = hits + fresh
    seq.num_cached_tokens = num_cached_blocks * bm.block_size
    return Allocated(seq.seq_id, fresh, hits, seq.num_cached_tokens, bm.num_free_blocks)
