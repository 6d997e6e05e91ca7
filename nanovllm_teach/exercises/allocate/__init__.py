"""Exercise ``allocate``: a new sequence's block table: shared prefix blocks and fresh ones.

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference.
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.exercises.engine_grading import EngineExercise, Piece
from nanovllm_teach.exercises.snapshots import StateWire
from nanovllm_teach.exercises.worker import is_int
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.step_workloads import PREFIX_REUSE, SHARED_PREFIXES, TIGHT_CACHE

ORDER = 60  # the course's order (``nanovllm-teach exercises``): after the block manager's questions


# What the check says, after "your allocate " / "你的 allocate " in the verdict.
NOT_BLOCK_IDS = Text(en="left seq {seq} a block table {table!r}: it must be a list of block ids (ints from 0 to "
                        "{last})",
                     zh="给序列 {seq} 留下的块表是 {table!r}：它必须是由块 id 组成的 list（0 到 {last} 的 int）")
WRONG_BLOCKS = Text(en="gave seq {seq} the block table {table} for its {tokens} tokens, which need {blocks} different "
                       "blocks of {size}",
                    zh="给序列 {seq} 的块表是 {table}，但它的 {tokens} 个 token 需要 {blocks} 个互不相同的块"
                       "（每块 {size} 个 token）")
NO_HOLDER = Text(en="gave seq {seq} blocks {table} and left some of them with no holder (ref_count 0)",
                 zh="给了序列 {seq} 块 {table}，却让其中一些块没有持有者（ref_count 为 0）")
CACHED_TOKENS = Text(en="left seq.num_cached_tokens at {value!r}, but its {cached} cached block(s) already hold the "
                        "K/V of {tokens} tokens",
                     zh="把 seq.num_cached_tokens 留在了 {value!r}，但这个序列已缓存的 {cached} 个块里已经存着 "
                        "{tokens} 个 token 的 K/V")


def _check_allocation(args: tuple[Any, ...], result: Any) -> str | None:
    bm, seq, num_cached_blocks = args
    table = seq.block_table
    if not isinstance(table, list) or not all(is_int(b) and 0 <= b < bm.num_blocks for b in table):
        return say(NOT_BLOCK_IDS, seq=seq.seq_id, table=table, last=bm.num_blocks - 1)
    if len(table) != seq.num_blocks or len(set(table)) != len(table):
        return say(WRONG_BLOCKS, seq=seq.seq_id, table=table, tokens=seq.num_tokens, blocks=seq.num_blocks,
                   size=bm.block_size)
    if any(bm.blocks[b].ref_count < 1 for b in table):
        return say(NO_HOLDER, seq=seq.seq_id, table=table)
    if seq.num_cached_tokens != num_cached_blocks * bm.block_size:
        return say(CACHED_TOKENS, value=seq.num_cached_tokens, cached=num_cached_blocks,
                   tokens=num_cached_blocks * bm.block_size)
    return None


TITLE = Text(en='Admitting a sequence: shared prefix blocks and fresh ones',
             zh='接纳一个序列：共享的前缀块与新分配的块')
# Hints from the gentlest to the strongest; none of them is the code.
HINTS = (
    Text(en=("The first num_cached_blocks blocks are in the cache: which dict maps a block's hash to "
             'its block, and which hash does block i have? Each reused block gets one more holder; '
             'what must change for a block that had none (where does a freed block wait)?'),
         zh=('前 num_cached_blocks 个块已经在缓存里：哪个 dict 把块的哈希映射到块本身？第 i '
             '个块的哈希又是什么？每个被复用的块多了一个持有者；对一个原本没有持有者的块，'
             '还有什么必须跟着改变（被释放的块在哪里等待）？')),
    Text(en=('Walk i over the cached blocks with h = compute_block_hash(seq.block(i), h), from h = '
             'NO_HASH, and look h up in bm.hash_to_block_id. A hit whose ref_count is 0 moves from '
             "bm.free_block_ids to bm.used_block_ids; every hit's ref_count goes up by 1. The rest "
             'come from bm.take_free_block(). Then the block table (hits + fresh), num_cached_tokens, '
             'and return the Allocated record of it all.'),
         zh=('用 h = compute_block_hash(seq.block(i), h) 依次遍历缓存命中的块（h 从 NO_HASH 开始），'
             '在 bm.hash_to_block_id 里查 h。ref_count 为 0 的命中块要从 bm.free_block_ids 移到 '
             'bm.used_block_ids；每个命中块的 ref_count 加 1。其余的块由 bm.take_free_block() 分配。'
             '最后设置块表（命中块 + 新块）和 num_cached_tokens，并把这一切作为 Allocated 记录返回。')),
)


EXERCISE = EngineExercise(
    "allocate", TITLE, "BlockManager.allocate",
    ("allocate",),
    HINTS,
    (Piece("allocate", "nanovllm_teach.engine.block_manager:BlockManager.allocate", _check_allocation,
           state=StateWire("block_manager", ("seq", "int"))),),
    (PREFIX_REUSE, SHARED_PREFIXES, TIGHT_CACHE))
