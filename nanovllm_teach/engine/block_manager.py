"""Resources layer: the paged KV cache's bookkeeping — which physical block holds which tokens, and who
shares it. Pure Python, no torch: the tensors live in the model runner, this module only hands out ids.

Paging: a sequence's K/V lives in fixed-size blocks listed in its ``block_table``; block ``b`` covers
cache slots ``b * block_size … b * block_size + block_size - 1``.

Prefix caching: once a block is full, its content is named by a chained hash,
``hash(block_i) = xxh64(hash(block_{i-1}) || tokens_i)``, so equal hashes mean equal *prefixes*. A new
sequence whose leading blocks hash to known blocks reuses them (reference count +1) after checking the
tokens really match. A freed block keeps its hash and content until it is handed out again.

Every hand-out and release is returned to the caller as a record (``engine/decisions.py``). A
``block_table`` is only appended to (``may_append``) or replaced whole (``allocate``, ``deallocate``), never
shortened or rewritten in place: a list held from earlier still starts with the blocks it had then. It is
detached *before* its references are dropped, so an interrupt can leak a block, never leave a count below 0;
``rebuild`` repairs whatever an interrupted step left half-done, from the block tables of the sequences still
alive.

Emits no events (the orchestration layer reports its records).
"""

from __future__ import annotations

from array import array
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass, field

import xxhash

from nanovllm_teach.engine.decisions import Allocated, Freed
from nanovllm_teach.engine.sequence import Sequence

NO_HASH = -1


@dataclass
class Block:
    block_id: int
    ref_count: int = 0
    hash: int = NO_HASH
    token_ids: list[int] = field(default_factory=list)


def compute_block_hash(token_ids: list[int], prefix_hash: int = NO_HASH) -> int:
    """The chained hash of one full block given the hash of the block before it."""
    h = xxhash.xxh64()
    if prefix_hash != NO_HASH:
        h.update(prefix_hash.to_bytes(8, "little"))
    h.update(array("q", token_ids).tobytes())
    return h.intdigest()


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True) -> None:
        self.block_size = block_size
        self.enable_prefix_caching = enable_prefix_caching
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.hash_to_block_id: dict[int, int] = {}
        self.free_block_ids: deque[int] = deque(range(num_blocks))
        self.used_block_ids: set[int] = set()

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    @property
    def num_free_blocks(self) -> int:
        return len(self.free_block_ids)

    def _cached_prefix(self, seq: Sequence) -> list[int]:
        """Ids of the blocks that already hold this sequence's leading full blocks.

        The last token is never taken from the cache: the model must compute at least one position to
        produce logits for the next token.
        """
        if not self.enable_prefix_caching:
            return []
        hits: list[int] = []
        h = NO_HASH
        for i in range((seq.num_tokens - 1) // self.block_size):
            tokens = seq.block(i)
            h = compute_block_hash(tokens, h)
            block_id = self.hash_to_block_id.get(h)
            # The token check guards against a hash collision serving someone else's K/V.
            if block_id is None or self.blocks[block_id].token_ids != tokens:
                break
            hits.append(block_id)
        return hits

    def can_allocate(self, seq: Sequence) -> int:
        """How many leading blocks are cached (0 or more) if ``seq`` fits now, else -1."""
        hits = self._cached_prefix(seq)
        # A hit on a block nobody holds still takes it out of the free list.
        needed = seq.num_blocks - len(hits) + sum(self.blocks[b].ref_count == 0 for b in hits)
        return len(hits) if needed <= self.num_free_blocks else -1

    def allocate(self, seq: Sequence, num_cached_blocks: int) -> Allocated:
        """Fill ``seq.block_table``: the first ``num_cached_blocks`` reused, the rest fresh."""
        assert not seq.block_table, f"seq {seq.seq_id} already holds blocks"
        hits = self._cached_prefix(seq)[:num_cached_blocks]
        assert len(hits) == num_cached_blocks
        for block_id in hits:
            block = self.blocks[block_id]
            if block.ref_count == 0:
                self.free_block_ids.remove(block_id)
                self.used_block_ids.add(block_id)
            block.ref_count += 1
        fresh = [self.take_free_block() for _ in range(seq.num_blocks - num_cached_blocks)]
        seq.block_table = hits + fresh
        seq.num_cached_tokens = num_cached_blocks * self.block_size
        return Allocated(seq.seq_id, fresh, hits, seq.num_cached_tokens, self.num_free_blocks)

    def take_free_block(self) -> int:
        block_id = self.free_block_ids.popleft()
        block = self.blocks[block_id]
        assert block.ref_count == 0
        # Reusing the block overwrites its K/V, so the old content is no longer findable by hash.
        if block.hash != NO_HASH and self.hash_to_block_id.get(block.hash) == block_id:
            del self.hash_to_block_id[block.hash]
        block.hash, block.token_ids, block.ref_count = NO_HASH, [], 1
        self.used_block_ids.add(block_id)
        return block_id

    def deallocate(self, seq: Sequence) -> Freed:
        """Drop ``seq``'s references; blocks nobody holds go back to the free list (hash kept)."""
        # The sequence lets go first: interrupted below, it can never drop the same reference twice.
        released, seq.block_table = seq.block_table, []
        seq.num_cached_tokens = 0
        freed: list[int] = []
        for block_id in reversed(released):
            block = self.blocks[block_id]
            block.ref_count -= 1
            if block.ref_count == 0:
                self.used_block_ids.discard(block_id)
                self.free_block_ids.append(block_id)
                freed.append(block_id)
        return Freed(seq.seq_id, released, freed, self.num_free_blocks)

    def can_append(self, seq: Sequence) -> bool:
        """Can ``seq`` decode one more token? Only a token starting a new block needs a free block."""
        return self.num_free_blocks >= (seq.num_blocks > len(seq.block_table))

    def may_append(self, seq: Sequence) -> Allocated | None:
        """Give ``seq`` the new block its next token needs, if it needs one."""
        if seq.num_blocks > len(seq.block_table):
            block_id = self.take_free_block()
            seq.block_table.append(block_id)
            return Allocated(seq.seq_id, [block_id], [], 0, self.num_free_blocks)
        return None

    def hash_blocks(self, seq: Sequence) -> None:
        """After a step computed ``seq.num_scheduled_tokens`` more K/V rows, name every block that just
        became full so later requests can find it."""
        if not self.enable_prefix_caching:
            return
        start = seq.num_cached_tokens // self.block_size
        end = (seq.num_cached_tokens + seq.num_scheduled_tokens) // self.block_size
        for i in range(start, end):
            block = self.blocks[seq.block_table[i]]
            if block.hash != NO_HASH:
                continue  # a reused prefix block is already named
            prefix = self.blocks[seq.block_table[i - 1]].hash if i > 0 else NO_HASH
            tokens = seq.block(i)
            block.hash = compute_block_hash(tokens, prefix)
            block.token_ids = tokens
            self.hash_to_block_id[block.hash] = block.block_id

    def rebuild(self, block_tables: Iterable[list[int]]) -> list[int]:
        """Rebuild every reference count and the free list from the block tables of the live sequences;
        returns the blocks this freed. Repairs whatever an interrupted operation left half-done."""
        counts = Counter(block_id for table in block_tables for block_id in table)
        for block in self.blocks:
            block.ref_count = counts[block.block_id]
        # Blocks already free keep their place (the oldest freed is handed out first); the newly freed follow.
        still_free = [b for b in dict.fromkeys(self.free_block_ids) if not counts[b]]
        freed = sorted(set(range(self.num_blocks)) - set(still_free) - set(counts))
        self.free_block_ids = deque(still_free + freed)
        self.used_block_ids = set(counts)
        return freed
