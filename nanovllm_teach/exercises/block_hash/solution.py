"""Reference solution of ``block_hash``: the chained hash that names a full KV block."""

from __future__ import annotations

from array import array

import xxhash

from nanovllm_teach.engine.block_manager import NO_HASH


def compute_block_hash(token_ids: list[int], prefix_hash: int = NO_HASH) -> int:
    h = xxhash.xxh64()
    # The previous block's hash goes in first: equal hashes then mean equal *prefixes*, not only equal blocks.
    if prefix_hash != NO_HASH:
        h.update(prefix_hash.to_bytes(8, "little"))
    h.update(array("q", token_ids).tobytes())
    return h.intdigest()
