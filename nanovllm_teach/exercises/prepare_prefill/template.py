"""Exercise ``prepare_prefill`` — laying out a prefill batch: positions, ``cu_seqlens`` and the slot mapping.

A prefill step computes several sequences' new tokens together, flattened into one row. Before it runs, the
model runner (``ModelRunner.prepare_prefill`` in ``nanovllm_teach/engine/model_runner.py``) calls your
function (``prefill_layout``, in place of ``nanovllm_teach/engine/prefill_layout.py``'s) to say where
everything sits, and makes the attention layers' tensors from your lists. Sequence ``i`` of the batch has
``num_cached_tokens[i]`` tokens whose K/V is in the cache already (a reused prefix, or the earlier chunks of
a long prompt) and computes the next ``num_new_tokens[i]``; it holds the KV blocks ``block_tables[i]``.
Return four lists of ints:

1. ``positions``: for every new token, in batch order, its position in its sequence (from 0, the cached
   tokens included: the first new token of a sequence with 8 cached tokens is at position 8).
2. ``cu_seqlens_q``: where each sequence's queries start in the flat row, as cumulative sums from 0 (one
   more entry than sequences): only the new tokens have queries.
3. ``cu_seqlens_k``: the same for keys: a sequence's keys are *all* its tokens so far, cached and new,
   because its new tokens attend to its cached prefix too.
4. ``slot_mapping``: for every new token, the cache slot its K/V is stored in. Block ``b`` owns slots
   ``b * block_size`` to ``b * block_size + block_size - 1``; the token at position ``p`` is in the
   sequence's logical block ``p // block_size``, which is physical block ``block_tables[i][p // block_size]``.
   A sequence with an empty block table (the engine's warm-up, which stores nothing) gets no slots.

Example: blocks of 4; sequence 0 has 0 cached and 3 new tokens in block ``[5]``; sequence 1 has 4 cached
and 2 new tokens in blocks ``[2, 7]``: positions ``[0, 1, 2, 4, 5]``, ``cu_seqlens_q == [0, 3, 5]``,
``cu_seqlens_k == [0, 3, 9]``, slots ``[20, 21, 22, 28, 29]``.

Grade it: ``nanovllm-teach grade prepare_prefill prepare_prefill.py``; a wrong list shows up as the first
``PREPARE_PREFILL_TENSORS`` that differs from the reference (then the model computes something else).
Stuck? ``hint("prepare_prefill", 1)`` says where to look, ``hint("prepare_prefill", 2)`` how.

中文说明：

练习 ``prepare_prefill``——安排一个预填充（prefill）batch：位置、``cu_seqlens`` 与槽位映射（slot mapping）。

一个预填充步把几个序列的新 token 拼成一行，一起计算。运行之前，模型运行器（model runner）
（``nanovllm_teach/engine/model_runner.py`` 中的 ``ModelRunner.prepare_prefill``）调用你的函数
（``prefill_layout``，替换 ``nanovllm_teach/engine/prefill_layout.py`` 里的那个）来说明每样东西的位置，
并用你给出的 list 生成注意力层的张量。batch 中的序列 ``i`` 有 ``num_cached_tokens[i]`` 个 token 的 K/V
已经在缓存中（复用的前缀，或一个长 prompt 之前的分块），这一步计算接下来的 ``num_new_tokens[i]`` 个；
它的块表（block table）是 ``block_tables[i]``，即它持有的 KV 块。返回四个由 int 组成的 list：

1. ``positions``：按 batch 的顺序，每个新 token 在它所属序列中的位置（从 0 开始，已缓存的 token
   也计入：一个有 8 个已缓存 token 的序列，它的第一个新 token 位于位置 8）。
2. ``cu_seqlens_q``：每个序列的 query 在这一行中从哪里开始，写成从 0 开始的累加和（比序列数多一项）：
   只有新 token 才有 query。
3. ``cu_seqlens_k``：key 的同一种累加和：一个序列的 key 是它到目前为止的*全部* token，
   已缓存的和新的都算，因为它的新 token 也要关注它已缓存的前缀。
4. ``slot_mapping``：每个新 token 的 K/V 存放的缓存槽位。块 ``b`` 拥有槽位 ``b * block_size`` 到
   ``b * block_size + block_size - 1``；位置 ``p`` 的 token 在序列的逻辑块 ``p // block_size`` 中，
   也就是物理块 ``block_tables[i][p // block_size]``。块表为空的序列（引擎的预热（warm-up），
   它什么都不存）没有槽位。

例：每块 4 个 token；序列 0 有 0 个已缓存、3 个新 token，在块 ``[5]`` 中；序列 1 有 4 个已缓存、2 个新 token，
在块 ``[2, 7]`` 中：位置是 ``[0, 1, 2, 4, 5]``，``cu_seqlens_q == [0, 3, 5]``，``cu_seqlens_k == [0, 3, 9]``，
槽位是 ``[20, 21, 22, 28, 29]``。

评分：``nanovllm-teach grade prepare_prefill prepare_prefill.py``；某个 list 算错时，
会表现为第一个与参考实现不同的 ``PREPARE_PREFILL_TENSORS``（之后模型算出的东西也会不同）。
卡住了？``hint("prepare_prefill", 1)`` 告诉你该看哪里，``hint("prepare_prefill", 2)`` 告诉你该怎么做。
"""

from __future__ import annotations


def prefill_layout(num_cached_tokens: list[int], num_new_tokens: list[int], block_tables: list[list[int]],
                   block_size: int) -> tuple[list[int], list[int], list[int], list[int]]:
    """``(positions, cu_seqlens_q, cu_seqlens_k, slot_mapping)`` of the prefill batch."""
    raise NotImplementedError
