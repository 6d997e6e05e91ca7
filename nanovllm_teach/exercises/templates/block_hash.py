"""Exercise ``block_hash`` — the prefix-cache hash chain.

Prefix caching lets a new request reuse the KV blocks of an earlier one that began with the same tokens.
The block manager (``nanovllm_teach/engine/block_manager.py``) finds them by hash: every *full* block gets a
hash, ``hash_to_block_id`` maps it to the block, and a new sequence looks its leading blocks up one by one.

The catch: a block's K/V depends on *every token before it*, not only on its own tokens (attention looks
back). Two blocks with the same tokens after different prefixes hold different K/V. So the hash of block
``i`` must cover block ``i``'s tokens *and* everything before it — cheaply, by folding in the hash of block
``i - 1``: ``hash_i = H(hash_{i-1}, tokens_i)``. The first block has no predecessor: ``prefix_hash`` is
``NO_HASH`` (-1) then.

Any good 64-bit hash will do (``xxhash.xxh64`` is installed: ``h = xxhash.xxh64(); h.update(bytes);
h.intdigest()``); return an int. The grader checks what your hash *does*: its workload caches equal
blocks under different prefixes, and only a chained hash reuses the right ones.

Grade it: ``nanovllm-teach grade block_hash this_file.py``.
"""

from __future__ import annotations

from nanovllm_teach.engine.block_manager import NO_HASH


def compute_block_hash(token_ids: list[int], prefix_hash: int = NO_HASH) -> int:
    """The hash naming one full block of ``token_ids`` that follows the block hashed ``prefix_hash``."""
    raise NotImplementedError("hash the previous block's hash (unless it is NO_HASH) together with this "
                              "block's token ids, and return an int")
