"""Exercise ``allocate`` — a new sequence's block table: shared prefix blocks and fresh ones.

When the scheduler admits a waiting sequence into a prefill, the block manager
(``nanovllm_teach/engine/block_manager.py``) gives it every KV block its tokens need. Some of them may
exist already: prefix caching names every *full* block by a chained hash (block ``i``'s hash is
``compute_block_hash(seq.block(i), hash of block i - 1)``, the first block's prefix hash is ``NO_HASH``)
and ``bm.hash_to_block_id`` maps each hash to the block that holds those tokens' K/V. Before admitting,
``BlockManager.can_allocate`` has checked that the first ``num_cached_blocks`` blocks of ``seq`` are
cached (and that enough blocks are free); ``allocate`` then builds the block table.

Facts you need:

- ``bm.blocks[block_id]`` is a ``Block`` with a ``ref_count``: how many sequences hold it now. A cached
  block may be held by other sequences (it gets one more holder), or by nobody: a block whose holders all
  finished keeps its hash and K/V in the free list (``bm.free_block_ids``, a deque) until it is handed
  out again. Blocks in use are in ``bm.used_block_ids`` (a set); a block is in exactly one of the two.
- ``bm.take_free_block()`` hands out the oldest free block (its id), held once, its old hash dropped.
- ``seq.num_blocks`` is how many blocks ``seq``'s tokens need; ``seq.block(i)`` the token ids of block ``i``.
- When you are done, ``seq.block_table`` lists the cached blocks then the fresh ones, in order (set it in
  one assignment), and ``seq.num_cached_tokens`` counts the tokens whose K/V the cached blocks already hold
  (the prefill computes only the others).
- Return what you did, as the record ``Allocated(seq_id, block_ids, shared_block_ids, num_cached_tokens,
  num_free_blocks)`` (``nanovllm_teach/engine/decisions.py``): the fresh blocks, the cached ones, the
  cached tokens and how many blocks are free afterwards. The engine turns it into the TEACHING events
  PREFIX_CACHE_HIT and BLOCK_ALLOCATE.

Example: blocks of 4 tokens; a prompt of 10 tokens whose first 2 blocks are cached (in blocks 7 and 3, block
7 held by another sequence, block 3 by nobody) needs 3 blocks: 7 (now held twice), 3 (taken out of the free
list, held once) and one fresh block; 8 of its tokens need no computing.

Write it from ``bm.hash_to_block_id``, ``bm.blocks`` and ``compute_block_hash``, not by calling the block
manager's own lookup (``_cached_prefix``). Grade it: ``nanovllm-teach grade allocate this_file.py``.
Stuck? ``hint("allocate", 1)`` says where to look, ``hint("allocate", 2)`` how.
"""

from __future__ import annotations

from nanovllm_teach.engine.block_manager import NO_HASH, BlockManager, compute_block_hash
from nanovllm_teach.engine.decisions import Allocated
from nanovllm_teach.engine.sequence import Sequence


def allocate(bm: BlockManager, seq: Sequence, num_cached_blocks: int) -> Allocated:
    """Give ``seq`` its blocks: the first ``num_cached_blocks`` from the prefix cache, the rest fresh."""
    raise NotImplementedError
