"""Exercise ``can_allocate`` — may a waiting sequence be admitted now, and how much of it is cached?

Before the scheduler admits a waiting sequence into a prefill, it asks the block manager
(``nanovllm_teach/engine/block_manager.py``) one question with two answers: how many of the sequence's
leading blocks already hold its K/V in the prefix cache, and is there room for the rest? Your function
answers it: the number of cached leading blocks (0 or more) if the sequence fits now, else -1.

Facts you need:

- Prefix caching names every *full* block by a chained hash: block ``i``'s hash is
  ``compute_block_hash(seq.block(i), hash of block i - 1)``, and the first block's prefix hash is
  ``NO_HASH``. ``bm.hash_to_block_id`` maps a hash to the block that holds those tokens' K/V, and
  ``bm.blocks[block_id].token_ids`` are the tokens it holds: compare them too, so that a hash collision
  never serves someone else's K/V. Stop at the first block that is not cached.
- The sequence's last token is never taken from the cache: the model must compute at least one position
  to produce the logits of the next token. So only the first ``(seq.num_tokens - 1) // bm.block_size``
  blocks may be cached.
- With ``bm.enable_prefix_caching`` off, nothing is cached.
- Room: the sequence needs ``seq.num_blocks`` blocks. A cached block held by other sequences costs nothing
  more; a cached block that nobody holds (``ref_count == 0``) waits in the free list and must be taken out
  of it, so it counts against ``bm.num_free_blocks`` like a fresh one.

Example: blocks of 4 tokens, a 10-token prompt whose first two blocks are cached, one of them held by
another sequence and one free: it needs 3 blocks, of which 1 fresh and 1 taken back from the free list, so
it fits when at least 2 blocks are free and the answer is 2; with 1 free block the answer is -1.

Grade it: ``nanovllm-teach grade can_allocate this_file.py``. The grader runs the real engine with your
function in place of ``BlockManager.can_allocate`` and compares its decisions, as TEACHING events, with
the reference's. Stuck? ``hint("can_allocate", 1)`` says where to look, ``hint("can_allocate", 2)`` how.
"""

from __future__ import annotations

from nanovllm_teach.engine.block_manager import NO_HASH, BlockManager, compute_block_hash
from nanovllm_teach.engine.sequence import Sequence


def can_allocate(bm: BlockManager, seq: Sequence) -> int:
    """How many leading blocks of ``seq`` are cached (0 or more) if it fits now, else -1."""
    raise NotImplementedError
