"""Exercise ``decode_slot`` — where a decode token's K/V goes: the slot mapping.

The KV cache is one big array of *slots*, ``num_blocks * block_size`` of them: block ``b`` owns slots
``b * block_size`` to ``b * block_size + block_size - 1``. Before each decode step the model runner
(``ModelRunner.prepare_decode`` in ``nanovllm_teach/engine/model_runner.py``) tells the attention layers,
for every sequence, the slot where the K/V of its newest token must be stored: the ``slot_mapping``.

Facts you need (``seq`` is the sequence's entry in the step's batch, a ``ScheduledSeq`` from
``nanovllm_teach/engine/batch.py``):

- ``seq.num_tokens`` counts every token, the newest one (the one this step computes) included.
- ``seq.block_table`` lists the physical blocks the sequence holds, in order: logical block ``i`` (tokens
  ``i * block_size`` to ``i * block_size + block_size - 1``) lives in physical block ``seq.block_table[i]``.
- The scheduler has already given the sequence a new block if the newest token starts one.

Example: block size 4, ``seq.block_table == [7, 2]`` and 6 tokens: the newest token is the 2nd token of
the sequence's 2nd block, which is physical block 2, so its slot is 9.

Positions count from 0. Grade it: ``nanovllm-teach grade decode_slot decode_slot.py``; a wrong slot shows
up as the first ``PREPARE_DECODE_TENSORS.slot_mapping`` that differs from the reference.
Stuck? ``hint("decode_slot", 1)`` says where to look, ``hint("decode_slot", 2)`` how.

中文说明：

练习 ``decode_slot``——解码（decode）token 的 K/V 存到哪里：槽位映射（slot mapping）。

KV 缓存（KV cache）是一个由*槽位*（slot）组成的大数组，共有 ``num_blocks * block_size`` 个槽位：
块 ``b`` 拥有槽位 ``b * block_size`` 到 ``b * block_size + block_size - 1``。在每个解码步之前，
模型运行器（model runner，``nanovllm_teach/engine/model_runner.py`` 中的
``ModelRunner.prepare_decode``）会为每个序列告诉注意力层：
它最新的 token 的 K/V 必须存到哪个槽位，这就是 ``slot_mapping``。

你需要知道的事实（``seq`` 是该序列在这一步 batch 中的条目，即 ``nanovllm_teach/engine/batch.py`` 中的一个
``ScheduledSeq``）：

- ``seq.num_tokens`` 计入每一个 token，包括最新的那个（这一步要计算的那个）。
- ``seq.block_table`` 按顺序列出序列持有的物理块：逻辑块 ``i``（第 ``i * block_size`` 到第
  ``i * block_size + block_size - 1`` 个 token）位于物理块 ``seq.block_table[i]`` 中。
- 如果最新的 token 开启了一个新块，调度器（scheduler）已经为序列分配好了这个新块。

例：块大小为 4，``seq.block_table == [7, 2]``，共 6 个 token：
最新的 token 是序列第 2 个块中的第 2 个 token，而这个块是物理块 2，所以它的槽位是 9。

位置从 0 开始计数。评分：``nanovllm-teach grade decode_slot decode_slot.py``；槽位算错时，
会表现为第一个与参考实现不同的 ``PREPARE_DECODE_TENSORS.slot_mapping``。
卡住了？``hint("decode_slot", 1)`` 告诉你该看哪里，``hint("decode_slot", 2)`` 告诉你该怎么做。
"""

from __future__ import annotations

from nanovllm_teach.engine.batch import ScheduledSeq


def decode_slot(seq: ScheduledSeq, block_size: int) -> int:
    """The cache slot of ``seq``'s newest token."""
    raise NotImplementedError
