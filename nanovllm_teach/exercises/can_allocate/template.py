"""Exercise ``can_allocate`` — may a waiting sequence be admitted now, and how much of it is cached?

Before the scheduler admits a waiting sequence into a prefill, it asks the block manager
(``nanovllm_teach/engine/block_manager.py``) one question with two answers: how many of the sequence's
leading blocks already hold its K/V in the prefix cache, and is there room for the rest? Your function
answers it: the number of cached leading blocks (0 or more) if the sequence fits now, else -1.

Facts you need:

- Prefix caching names every *full* block by a chained hash: block ``i``'s hash is
  ``compute_block_hash(seq.block(i), hash of block i - 1)``, and the first block's prefix hash is
  ``NO_HASH``. ``bm.hash_to_block_id`` maps a hash to the block that holds those tokens' K/V, and
  ``bm.blocks[block_id].token_ids`` are the tokens it holds: compare them too, so that a hash collision
  never serves someone else's K/V. Stop at the first block that is not cached.
- The sequence's last token is never taken from the cache: the model must compute at least one position
  to produce the logits of the next token. So only the first ``(seq.num_tokens - 1) // bm.block_size``
  blocks may be cached.
- With ``bm.enable_prefix_caching`` off, nothing is cached.
- Room: the sequence needs ``seq.num_blocks`` blocks. A cached block held by other sequences costs nothing
  more; a cached block that nobody holds (``ref_count == 0``) waits in the free list and must be taken out
  of it, so it counts against ``bm.num_free_blocks`` like a fresh one.

Example: blocks of 4 tokens, a 10-token prompt whose first two blocks are cached, one of them held by
another sequence and one free: it needs 3 blocks, of which 1 fresh and 1 taken back from the free list, so
it fits when at least 2 blocks are free and the answer is 2; with 1 free block the answer is -1.

Grade it: ``nanovllm-teach grade can_allocate can_allocate.py``. The grader runs the real engine with your
function in place of ``BlockManager.can_allocate`` and compares its decisions, as TEACHING events, with
the reference's. Stuck? ``hint("can_allocate", 1)`` says where to look, ``hint("can_allocate", 2)`` how.

中文说明：

练习 ``can_allocate``——一个等待中的序列现在能否被接纳？其中有多少已被缓存？

调度器（scheduler）把一个等待中的序列接纳进预填充（prefill）之前，会向块管理器（block manager，
见 ``nanovllm_teach/engine/block_manager.py``）提一个有两个答案的问题：
这个序列开头有多少个块的 K/V 已经在前缀缓存（prefix cache）中，剩下的部分又有没有空间？你的函数来回答它：
如果序列现在放得下，返回已缓存的开头块数（0 或更多），否则返回 -1。

你需要知道的事实：

- 前缀缓存用链式哈希为每个*完整*的块命名：块 ``i`` 的哈希是
  ``compute_block_hash(seq.block(i), hash of block i - 1)``，第一个块的前缀哈希是 ``NO_HASH``。
  ``bm.hash_to_block_id`` 把哈希映射到保存着这些 token 的 K/V 的块，
  ``bm.blocks[block_id].token_ids`` 是该块保存的 token：也要比较它们，
  这样哈希冲突就永远不会把别人的 K/V 交给这个序列。遇到第一个未缓存的块就停下。
- 序列的最后一个 token 永远不从缓存中取：模型至少要计算一个位置，才能得到下一个 token 的 logits。
  所以只有前 ``(seq.num_tokens - 1) // bm.block_size`` 个块可以是已缓存的。
- 如果 ``bm.enable_prefix_caching`` 是关闭的，就没有任何块算作已缓存。
- 空间：序列需要 ``seq.num_blocks`` 个块。被其他序列持有的已缓存块不再额外占用空间；
  无人持有（``ref_count == 0``）的已缓存块在空闲列表中等待，必须从中取出，所以它和新块一样，
  要占用 ``bm.num_free_blocks`` 中的一个。

例：每块 4 个 token，一个 10 个 token 的 prompt，前两个块已缓存，其中一个被另一个序列持有，
另一个在空闲列表中：它需要 3 个块，其中 1 个是新块，1 个从空闲列表中取回，因此至少有 2 个空闲块时它放得下，
答案是 2；只有 1 个空闲块时，答案是 -1。

评分：``nanovllm-teach grade can_allocate can_allocate.py``。评分器运行真实的引擎，
用你的函数替换 ``BlockManager.can_allocate``，
并把它的决策（以 TEACHING 事件的形式）与参考实现的决策进行比较。卡住了？
``hint("can_allocate", 1)`` 告诉你该看哪里，``hint("can_allocate", 2)`` 告诉你该怎么做。
"""

from __future__ import annotations

from nanovllm_teach.engine.block_manager import NO_HASH, BlockManager, compute_block_hash
from nanovllm_teach.engine.sequence import Sequence


def can_allocate(bm: BlockManager, seq: Sequence) -> int:
    """How many leading blocks of ``seq`` are cached (0 or more) if it fits now, else -1."""
    raise NotImplementedError
