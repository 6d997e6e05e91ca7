"""Reference solution of ``can_allocate``: ``BlockManager.can_allocate``, admission's question."""

from __future__ import annotations

from nanovllm_teach.engine.block_manager import NO_HASH, BlockManager, compute_block_hash
from nanovllm_teach.engine.sequence import Sequence


def can_allocate(bm: BlockManager, seq: Sequence) -> int:
    hits: list[int] = []
    if bm.enable_prefix_caching:
        h = NO_HASH
        # The last token is always computed: only the full blocks before it may come from the cache.
        for i in range((seq.num_tokens - 1) // bm.block_size):
            h = compute_block_hash(seq.block(i), h)
            block_id = bm.hash_to_block_id.get(h)
            if block_id is None or bm.blocks[block_id].token_ids != seq.block(i):
                break  # the token check: a hash collision must never serve someone else's K/V
            hits.append(block_id)
    # A hit nobody holds waits in the free list: taking it costs a free block like a fresh one.
    needed = seq.num_blocks - len(hits) + sum(bm.blocks[b].ref_count == 0 for b in hits)
    return len(hits) if needed <= bm.num_free_blocks else -1
