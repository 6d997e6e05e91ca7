"""Exercise ``can_allocate``: may a waiting sequence be admitted now, and how much of it is cached?

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference.
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.exercises.engine_grading import EngineExercise, Piece
from nanovllm_teach.exercises.snapshots import StateWire
from nanovllm_teach.exercises.worker import is_int
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.step_workloads import PREFIX_REUSE, SHARED_PREFIXES, TIGHT_CACHE

ORDER = 40  # the course's order (``nanovllm-teach exercises``): the block manager, after the scheduler


# What the check says, after "your can_allocate " / "你的 can_allocate " in the verdict.
NOT_CACHED_BLOCKS = Text(en="returned {value!r} for seq {seq} ({tokens} tokens in {blocks} blocks): it must return -1 "
                            "(it does not fit) or the number of its leading blocks that are cached, an int from 0 to "
                            "{last} (its last token is always computed)",
                         zh="对序列 {seq}（{tokens} 个 token，占 {blocks} 个块）返回了 {value!r}：它必须返回 -1"
                            "（放不下），或者这个序列开头已缓存的块数，即 0 到 {last} 的 int（最后一个 token "
                            "总是要计算的）")


def _check_cached_blocks(args: tuple[Any, ...], result: Any) -> str | None:
    bm, seq = args
    if not is_int(result) or not -1 <= result < max(seq.num_blocks, 1):
        return say(NOT_CACHED_BLOCKS, value=result, seq=seq.seq_id, tokens=seq.num_tokens, blocks=seq.num_blocks,
                   last=seq.num_blocks - 1)
    return None


TITLE = Text(en="Admission's question: does it fit, and how much of it is cached?",
             zh='接纳前要回答的问题：放得下吗？其中多少已经缓存？')
# Hints from the gentlest to the strongest; none of them is the code.
HINTS = (
    Text(en=("Two questions in one: how many of the sequence's leading full blocks are already in the "
             'cache (a hash names each full block, chained to the one before), and are enough blocks '
             'free for the rest? Which token must always be computed, whatever the cache holds?'),
         zh=('一个问题里有两个问题：这个序列开头的完整块里，'
             '有几个已经在缓存中（每个完整块由一个哈希命名，并与前一个块串成链）'
             '？剩下的部分有没有足够的空闲块？无论缓存里有什么，哪个 token 必须始终重新计算？')),
    Text(en=('Walk i from 0 while i < (seq.num_tokens - 1) // bm.block_size: h = '
             'compute_block_hash(seq.block(i), h) from h = NO_HASH; stop at the first block whose '
             'hash is not in bm.hash_to_block_id or whose bm.blocks[...].token_ids differ from '
             'seq.block(i). With prefix caching off, nothing is cached. The blocks needed are '
             'seq.num_blocks minus the hits, plus each hit nobody holds (ref_count 0: it leaves the '
             'free list); compare with bm.num_free_blocks.'),
         zh=('当 i < (seq.num_tokens - 1) // bm.block_size 时，从 0 开始遍历 i：h = '
             'compute_block_hash(seq.block(i), h)，h 从 NO_HASH 开始；遇到第一个哈希不在 '
             'bm.hash_to_block_id 中、或 bm.blocks[...].token_ids 与 seq.block(i) 不同的块就停下。'
             '关闭前缀缓存时，什么都不算命中。需要的块数是 seq.num_blocks 减去命中数，'
             '再加上每个没有持有者的命中块（ref_count 为 0：它要离开空闲列表）；与 bm.num_free_blocks '
             '比较。')),
)


EXERCISE = EngineExercise(
    "can_allocate", TITLE, "BlockManager.can_allocate",
    ("can_allocate",),
    HINTS,
    (Piece("can_allocate", "nanovllm_teach.engine.block_manager:BlockManager.can_allocate", _check_cached_blocks,
           state=StateWire("block_manager", ("seq",))),),
    (PREFIX_REUSE, SHARED_PREFIXES, TIGHT_CACHE))
