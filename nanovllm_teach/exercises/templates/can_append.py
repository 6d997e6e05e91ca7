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
- ``bm.num_free_blocks`` is how many blocks are free; ``bm._take_free_block()`` hands one out (its id).
- The engine records each block it hands out during a decode as a TEACHING event, exactly so::

      bm.rec.emit("BLOCK_ALLOCATE", "decode", "decode_needs_new_block", seq_id=seq.seq_id,
                  block_ids=[block_id], shared_block_ids=[], num_free_blocks=bm.num_free_blocks)

Grade it: ``nanovllm-teach grade can_append this_file.py``.
"""

from __future__ import annotations

from nanovllm_teach.engine.block_manager import BlockManager
from nanovllm_teach.engine.sequence import Sequence


def can_append(bm: BlockManager, seq: Sequence) -> bool:
    """Can ``seq`` compute its newest token now? Only a token that starts a new block needs a free block."""
    raise NotImplementedError("compare the blocks seq's tokens need (seq.num_blocks) with the blocks it "
                              "holds (len(seq.block_table)); only then does a free block matter")


def may_append(bm: BlockManager, seq: Sequence) -> None:
    """Give ``seq`` the new block its newest token needs, if it needs one (and record it)."""
    raise NotImplementedError("if seq needs a new block, take one with bm._take_free_block(), append it to "
                              "seq.block_table and emit the BLOCK_ALLOCATE event shown in the module docstring")
