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

Grade it: ``nanovllm-teach grade block_hash block_hash.py``.
Stuck? ``hint("block_hash", 1)`` says where to look, ``hint("block_hash", 2)`` how.

中文说明：

练习 ``block_hash``——前缀缓存（prefix cache）的哈希链。

前缀缓存让一个新请求可以复用先前某个以相同 token 开头的请求的 KV 块。块管理器（block manager，
见 ``nanovllm_teach/engine/block_manager.py``）通过哈希找到这些块：每个*完整*的块都有一个哈希，
``hash_to_block_id`` 把哈希映射到对应的块，新序列则逐个查找它开头的那些块。

难点在于：一个块的 K/V 取决于*它之前的每一个 token*，而不只是它自己的 token（注意力会往前看）。
同样的 token 跟在不同的前缀后面，块中的 K/V 就不同，所以一个块的哈希必须代表截至并包括这个块的全部内容。
块管理器会把前一个块的哈希（``prefix_hash``）交给你；第一个块没有前一个块，
这时 ``prefix_hash`` 为 ``NO_HASH``（-1）。

约定：``compute_block_hash(token_ids, prefix_hash)`` 返回一个 int；
结果相等必须意味着 token id 相等*并且*前缀相等，因此只要 ``h1 != h2``，
就有 ``compute_block_hash([5, 6, 7, 8], h1) != compute_block_hash([5, 6, 7, 8], h2)``。
任何好的 64 位哈希都可以（已安装 ``xxhash``）；但绝不能返回 ``NO_HASH``。
评分器检查的是你的哈希*实际做了什么*：它的工作负载（workload）会在不同的前缀下缓存相同的块，
只有正确的哈希才会复用正确的块。

评分：``nanovllm-teach grade block_hash block_hash.py``。
卡住了？``hint("block_hash", 1)`` 告诉你该看哪里，``hint("block_hash", 2)`` 告诉你该怎么做。
"""

from __future__ import annotations

from nanovllm_teach.engine.block_manager import NO_HASH


def compute_block_hash(token_ids: list[int], prefix_hash: int = NO_HASH) -> int:
    """The hash naming one full block of ``token_ids`` that follows the block hashed ``prefix_hash``."""
    raise NotImplementedError
