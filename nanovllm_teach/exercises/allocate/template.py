"""Exercise ``allocate`` — a new sequence's block table: shared prefix blocks and fresh ones.

When the scheduler admits a waiting sequence into a prefill, the block manager
(``nanovllm_teach/engine/block_manager.py``) gives it every KV block its tokens need. Some of them may
exist already: prefix caching names every *full* block by a chained hash (block ``i``'s hash is
``compute_block_hash(seq.block(i), hash of block i - 1)``, the first block's prefix hash is ``NO_HASH``)
and ``bm.hash_to_block_id`` maps each hash to the block that holds those tokens' K/V. Before admitting,
``BlockManager.can_allocate`` has checked that the first ``num_cached_blocks`` blocks of ``seq`` are
cached (and that enough blocks are free); ``allocate`` then builds the block table.

Facts you need:

- ``bm.blocks[block_id]`` is a ``Block`` with a ``ref_count``: how many sequences hold it now. A cached
  block may be held by other sequences (it gets one more holder), or by nobody: a block whose holders all
  finished keeps its hash and K/V in the free list (``bm.free_block_ids``, a deque) until it is handed
  out again. Blocks in use are in ``bm.used_block_ids`` (a set); a block is in exactly one of the two.
- ``bm.take_free_block()`` hands out the oldest free block (its id), held once, its old hash dropped.
- ``seq.num_blocks`` is how many blocks ``seq``'s tokens need; ``seq.block(i)`` the token ids of block ``i``.
- When you are done, ``seq.block_table`` lists the cached blocks then the fresh ones, in order (set it in
  one assignment), and ``seq.num_cached_tokens`` counts the tokens whose K/V the cached blocks already hold
  (the prefill computes only the others).
- Return what you did, as the record ``Allocated(seq_id, block_ids, shared_block_ids, num_cached_tokens,
  num_free_blocks)`` (``nanovllm_teach/engine/decisions.py``): the fresh blocks, the cached ones, the
  cached tokens and how many blocks are free afterwards. The engine turns it into the TEACHING events
  PREFIX_CACHE_HIT and BLOCK_ALLOCATE.

Example: blocks of 4 tokens; a prompt of 10 tokens whose first 2 blocks are cached (in blocks 7 and 3, block
7 held by another sequence, block 3 by nobody) needs 3 blocks: 7 (now held twice), 3 (taken out of the free
list, held once) and one fresh block; 8 of its tokens need no computing.

Write it from ``bm.hash_to_block_id``, ``bm.blocks`` and ``compute_block_hash``, not by calling the block
manager's own lookup (``_cached_prefix``). Grade it: ``nanovllm-teach grade allocate allocate.py``.
Stuck? ``hint("allocate", 1)`` says where to look, ``hint("allocate", 2)`` how.

中文说明：

练习 ``allocate``——新序列的块表（block table）：共享的前缀块与新分配的块。

调度器（scheduler）把一个等待中的序列接纳进预填充（prefill）时，块管理器（block manager，
见 ``nanovllm_teach/engine/block_manager.py``）会给它分配其 token 所需的全部 KV 块。其中一些块可能已经存在：
前缀缓存（prefix caching）用链式哈希为每个*完整*的块命名（块 ``i`` 的哈希是
``compute_block_hash(seq.block(i), hash of block i - 1)``，第一个块的前缀哈希是 ``NO_HASH``），
``bm.hash_to_block_id`` 把每个哈希映射到保存着这些 token 的 K/V 的块。在接纳之前，
``BlockManager.can_allocate`` 已经确认 ``seq`` 的前 ``num_cached_blocks`` 个块都在缓存中（并且空闲块足够）；
随后由 ``allocate`` 构建块表。

你需要知道的事实：

- ``bm.blocks[block_id]`` 是一个 ``Block``，带有引用计数（reference count）``ref_count``：
  当前持有它的序列数。一个已缓存的块可能正被其他序列持有（那么它多了一个持有者），也可能无人持有：
  持有者全部结束的块会带着它的哈希和 K/V 留在空闲列表（``bm.free_block_ids``，一个 deque）中，
  直到再次被分配出去。使用中的块在 ``bm.used_block_ids``（一个 set）中；每个块恰好在这两者之一中。
- ``bm.take_free_block()`` 分配出最早的空闲块（返回它的 id），持有次数为 1，并丢弃它原来的哈希。
- ``seq.num_blocks`` 是 ``seq`` 的 token 需要的块数；``seq.block(i)`` 是块 ``i`` 中的 token id。
- 完成之后，``seq.block_table`` 按顺序先列出已缓存的块，再列出新分配的块（用一次赋值来设置它）；
  ``seq.num_cached_tokens`` 是 K/V 已保存在这些已缓存块中的 token 数（预填充只计算其余的 token）。
- 把你做的事作为记录 ``Allocated(seq_id, block_ids, shared_block_ids, num_cached_tokens, num_free_blocks)``
  返回（见 ``nanovllm_teach/engine/decisions.py``）：新分配的块、已缓存的块、已缓存的 token 数，
  以及分配之后还剩多少空闲块。引擎会把它变成 TEACHING 事件 PREFIX_CACHE_HIT 和 BLOCK_ALLOCATE。

例：每块 4 个 token；一个 10 个 token 的 prompt，前 2 个块已缓存（在块 7 和块 3 中，块 7 被另一个序列持有，
块 3 无人持有），它需要 3 个块：块 7（现在被持有两次）、块 3（从空闲列表中取出，持有一次）和一个新块；
它有 8 个 token 不需要计算。

请直接基于 ``bm.hash_to_block_id``、``bm.blocks`` 和 ``compute_block_hash`` 来写，
不要调用块管理器自己的查找函数（``_cached_prefix``）。评分：``nanovllm-teach grade allocate allocate.py``。
卡住了？``hint("allocate", 1)`` 告诉你该看哪里，``hint("allocate", 2)`` 告诉你该怎么做。
"""

from __future__ import annotations

from nanovllm_teach.engine.block_manager import NO_HASH, BlockManager, compute_block_hash
from nanovllm_teach.engine.decisions import Allocated
from nanovllm_teach.engine.sequence import Sequence


def allocate(bm: BlockManager, seq: Sequence, num_cached_blocks: int) -> Allocated:
    """Give ``seq`` its blocks: the first ``num_cached_blocks`` from the prefix cache, the rest fresh."""
    raise NotImplementedError
