"""Exercise ``can_append`` — growing a sequence by one token: ``can_append`` and ``may_append``.

A decode step computes one new token per sequence; its K/V must go somewhere. KV blocks hold
``bm.block_size`` tokens each, so most tokens land in the sequence's last block, and only the token that
*starts* a block needs a fresh one from the free list. These two ``BlockManager`` methods
(``nanovllm_teach/engine/block_manager.py``) decide that; the scheduler calls them for every sequence it
decodes (and preempts someone when ``can_append`` says no).

Facts you need:

- When the scheduler asks, the newest token is already counted: ``seq.num_tokens`` includes it, and
  ``seq.num_blocks`` is the number of blocks all of ``seq``'s tokens need. ``seq.block_table`` lists the
  blocks it holds.
- ``bm.num_free_blocks`` is how many blocks are free; ``bm.take_free_block()`` hands one out (its id).
- ``may_append`` returns what it did: ``Allocated(seq.seq_id, [block_id], [], 0, bm.num_free_blocks)``
  (``nanovllm_teach/engine/decisions.py``: the fresh block, no shared ones, no cached tokens, the free
  blocks left) when it gave a block, ``None`` when none was needed. The engine reports it as the TEACHING
  event BLOCK_ALLOCATE.

Example: with blocks of 4 tokens, a sequence of 9 tokens holding 2 blocks needs a third block for its
newest token (the 9th starts block 3): ``can_append`` is True only if a block is free, and ``may_append``
hands it one. At 10 tokens with 3 blocks, nothing is needed: ``can_append`` is True even with no free
block, and ``may_append`` does nothing.

Grade it: ``nanovllm-teach grade can_append this_file.py``.
Stuck? ``hint("can_append", 1)`` says where to look, ``hint("can_append", 2)`` how.
"""

from __future__ import annotations

from nanovllm_teach.engine.block_manager import BlockManager
from nanovllm_teach.engine.decisions import Allocated
from nanovllm_teach.engine.sequence import Sequence


def can_append(bm: BlockManager, seq: Sequence) -> bool:
    """Can ``seq`` compute its newest token now? Only a token that starts a new block needs a free block."""
    raise NotImplementedError


def may_append(bm: BlockManager, seq: Sequence) -> Allocated | None:
    """Give ``seq`` the new block its newest token needs, if it needs one (and record it)."""
    raise NotImplementedError
