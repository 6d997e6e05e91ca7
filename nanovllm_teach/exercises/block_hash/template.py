"""Exercise ``block_hash`` — the prefix-cache hash chain.

Prefix caching lets a new request reuse the KV blocks of an earlier one that began with the same tokens.
The block manager (``nanovllm_teach/engine/block_manager.py``) finds them by hash: every *full* block gets a
hash, ``hash_to_block_id`` maps it to the block, and a new sequence looks its leading blocks up one by one.

The catch: a block's K/V depends on *every token before it*, not only on its own tokens (attention looks
back). Two blocks with the same tokens after different prefixes hold different K/V, so a block's hash
must stand for everything up to and including it. The block manager hands you the hash of the block before
(``prefix_hash``); the first block has none: ``prefix_hash`` is ``NO_HASH`` (-1) then.

The contract: ``compute_block_hash(token_ids, prefix_hash)`` returns an int; equal results must mean equal
token ids *and* equal prefixes, so ``compute_block_hash([5, 6, 7, 8], h1) != compute_block_hash([5, 6, 7,
8], h2)`` whenever ``h1 != h2``. Any good 64-bit hash will do (``xxhash`` is installed); never return
``NO_HASH``. The grader checks what your hash *does*: its workload caches equal blocks under different
prefixes, and only a right hash reuses the right ones.

Grade it: ``nanovllm-teach grade block_hash this_file.py``.
Stuck? ``hint("block_hash", 1)`` says where to look, ``hint("block_hash", 2)`` how.
"""

from __future__ import annotations

from nanovllm_teach.engine.block_manager import NO_HASH


def compute_block_hash(token_ids: list[int], prefix_hash: int = NO_HASH) -> int:
    """The hash naming one full block of ``token_ids`` that follows the block hashed ``prefix_hash``."""
    raise NotImplementedError
