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

Grade it: ``nanovllm-teach grade can_append can_append.py``.
Stuck? ``hint("can_append", 1)`` says where to look, ``hint("can_append", 2)`` how.

中文说明：

练习 ``can_append``——让序列增长一个 token：``can_append`` 与 ``may_append``。

一个解码（decode）步为每个序列计算一个新 token；它的 K/V 必须有地方存放。
每个 KV 块保存 ``bm.block_size`` 个 token，所以大多数 token 都落在序列的最后一个块中，
只有*开启*一个新块的 token 才需要从空闲列表中取一个新块。``BlockManager`` 的这两个方法
（``nanovllm_teach/engine/block_manager.py``）负责做出这个判断；
调度器（scheduler）对它解码的每个序列都会调用它们（当 ``can_append`` 回答“否”时，
就抢占（preemption）某个序列）。

你需要知道的事实：

- 调度器询问时，最新的 token 已经计算在内：``seq.num_tokens`` 包括它，
  ``seq.num_blocks`` 是 ``seq`` 的全部 token 所需的块数。``seq.block_table`` 列出它持有的块。
- ``bm.num_free_blocks`` 是空闲块的数量；``bm.take_free_block()`` 分配出一个块（返回它的 id）。
- ``may_append`` 返回它做了什么：分配了一个块时返回
  ``Allocated(seq.seq_id, [block_id], [], 0, bm.num_free_blocks)``（见
  ``nanovllm_teach/engine/decisions.py``：新分配的块、没有共享的块、没有已缓存的 token、剩余的空闲块数），
  不需要新块时返回 ``None``。引擎把它报告为 TEACHING 事件 BLOCK_ALLOCATE。

例：每块 4 个 token 时，一个有 9 个 token、持有 2 个块的序列需要为它最新的 token 准备第三个块（第 9 个
token 开启了第 3 个块）：只有存在空闲块时 ``can_append`` 才为 True，``may_append`` 则把一个块分配给它。
当序列有 10 个 token、持有 3 个块时，不需要任何新块：即使没有空闲块，``can_append`` 也为 True，
而 ``may_append`` 什么也不做。

评分：``nanovllm-teach grade can_append can_append.py``。
卡住了？``hint("can_append", 1)`` 告诉你该看哪里，``hint("can_append", 2)`` 告诉你该怎么做。
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
