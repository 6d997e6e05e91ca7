"""Exercise ``tp_slice`` — the slice of a weight a tensor-parallel rank holds.

With tensor parallelism the model's big matrices are split across ``tp_size`` processes (*ranks*, numbered
from 0), so that each holds and multiplies only a part. When the engine loads a checkpoint, every rank reads
each full Hugging Face tensor and keeps its own slice of it: ``rank_slice`` says which slice, and where it
goes in the rank's own parameter. The linear layers (``nanovllm_teach/layers/linear.py``) then copy it:
``param.narrow(dim, offset, length).copy_(loaded.narrow(dim, start, length))``.

Write ``rank_slice(kind, shape, parts, part, tp_size, tp_rank)``, returning ``(dim, start, length, offset)``:
rank ``tp_rank`` keeps the entries ``start`` to ``start + length - 1`` of the checkpoint tensor along ``dim``,
and puts them at ``offset`` along ``dim`` of its parameter. Return ``None`` when the rank keeps none of it
(its parameter then holds zeros).

- ``kind`` is ``"column"`` or ``"row"``: how the layer is split (below).
- ``shape`` is the checkpoint tensor's shape: ``[out, in]`` for a weight, ``[out]`` for a bias.
- ``parts`` lists the output sizes of the projections packed in the layer, in order, and the tensor is
  projection number ``part`` of them. ``qkv_proj`` packs ``q_proj``, ``k_proj`` and ``v_proj`` (part 0, 1,
  2); ``gate_up_proj`` packs ``gate_proj`` and ``up_proj`` (0, 1); ``o_proj`` and ``down_proj`` pack
  nothing (``parts`` has one entry, ``part`` is 0).

Facts you need:

- A column-parallel layer (``qkv_proj``, ``gate_up_proj``) splits its *output* features: every rank gets an
  equal share of the rows of each packed projection, rank 0 the first share, and no communication is needed.
  In the rank's parameter the projections stay packed in the same order, each one's share after the shares
  of the projections before it. A bias has one entry per output feature and is split like the rows.
- With grouped-query attention ``k_proj`` and ``v_proj`` have fewer rows than ``q_proj`` (fewer key/value
  heads than query heads); the shapes are given to you, whole heads always land on each rank.
- A row-parallel layer (``o_proj``, ``down_proj``) splits its *input* features: the columns of its weight.
  Each rank multiplies its part and an all-reduce sums the ranks' outputs. Its bias would be added by every
  rank before that sum: only one rank, rank 0, may hold it.

Example: ``tp_size == 2``, ``qkv_proj`` packing ``parts == [32, 16, 16]``; rank 1 keeps rows 8 to 15 of
``k_proj``'s weight (``shape == [16, 16]``) and puts them right after its 16 rows of ``q_proj``.

It is graded by loading a small Qwen3 model (8 query heads, 4 key/value heads, biases) as every rank of 1,
2 and 4 ranks, through the engine's own loader with your function, and comparing every rank's
``qkv_proj``, ``o_proj``, ``gate_up_proj`` and ``down_proj`` with the reference's. Grade it:
``nanovllm-teach grade tp_slice tp_slice.py``. Stuck? ``hint("tp_slice", 1)`` says where to look,
``hint("tp_slice", 2)`` how.

中文说明：

练习 ``tp_slice``——一个张量并行（tensor parallelism）的 rank 持有权重的哪一片。

使用张量并行时，模型的大矩阵被切分到 ``tp_size`` 个进程（称为 *rank*，从 0 开始编号）上，
每个进程只持有并计算其中一部分。引擎加载 checkpoint 时，每个 rank 都会读入每个完整的 Hugging Face 张量，
只留下属于自己的那一片：``rank_slice`` 说明是哪一片，以及它放在这个 rank 自己的参数中的什么位置。
随后线性层（``nanovllm_teach/layers/linear.py``）把它复制过去：
``param.narrow(dim, offset, length).copy_(loaded.narrow(dim, start, length))``。

写出 ``rank_slice(kind, shape, parts, part, tp_size, tp_rank)``，返回 ``(dim, start, length, offset)``：
rank ``tp_rank`` 留下 checkpoint 张量沿 ``dim`` 的第 ``start`` 到第 ``start + length - 1`` 项，
并把它们放在自己参数沿 ``dim`` 的 ``offset`` 处。
如果这个 rank 一点也不留，返回 ``None``（它的参数在那里存零）。

- ``kind`` 是 ``"column"`` 或 ``"row"``：这一层怎样切分（见下文）。
- ``shape`` 是 checkpoint 张量的形状：权重是 ``[out, in]``，偏置（bias）是 ``[out]``。
- ``parts`` 按顺序列出这一层中打包在一起的各个投影的输出大小，而这个张量是其中第 ``part`` 个投影。
  ``qkv_proj`` 打包了 ``q_proj``、``k_proj`` 和 ``v_proj``（part 为 0、1、2）；
  ``gate_up_proj`` 打包了 ``gate_proj`` 和 ``up_proj``（0、1）；``o_proj`` 和 ``down_proj`` 什么也没打包
  （``parts`` 只有一项，``part`` 为 0）。

你需要知道的事实：

- 列并行的层（``qkv_proj``、``gate_up_proj``）切分它的*输出*特征：每个打包的投影的行被平均分给各个 rank，
  rank 0 拿第一份，不需要任何通信。在 rank 的参数中，各投影仍按同样的顺序打包，每个投影的那一份
  排在它之前的各投影的那几份之后。偏置每个输出特征一项，和行一样切分。
- 使用分组查询注意力（grouped-query attention）时，``k_proj`` 和 ``v_proj`` 的行比 ``q_proj`` 少
  （键/值头比查询头少）；形状会给你，每个 rank 上总是整数个头。
- 行并行的层（``o_proj``、``down_proj``）切分它的*输入*特征，也就是权重的列。每个 rank 计算自己那部分，
  再由 all-reduce 把各 rank 的输出相加。它的偏置若由每个 rank 在求和之前都加一次，就会被加多次：
  只能由一个 rank，即 rank 0，持有它。

例：``tp_size == 2``，``qkv_proj`` 打包 ``parts == [32, 16, 16]``；rank 1 留下 ``k_proj`` 权重
（``shape == [16, 16]``）的第 8 到第 15 行，紧接着放在它那 16 行 ``q_proj`` 之后。

评分方式：把一个小的 Qwen3 模型（8 个查询头、4 个键/值头、带偏置）分别当作 1、2、4 个 rank 中的每一个来加载，
用引擎自己的加载器和你的函数，再把每个 rank 的 ``qkv_proj``、``o_proj``、``gate_up_proj`` 和
``down_proj`` 与参考实现的比较。评分：``nanovllm-teach grade tp_slice tp_slice.py``。
卡住了？``hint("tp_slice", 1)`` 告诉你该看哪里，``hint("tp_slice", 2)`` 告诉你该怎么做。
"""

from __future__ import annotations


def rank_slice(kind: str, shape: list[int], parts: list[int], part: int, tp_size: int,
               tp_rank: int) -> tuple[int, int, int, int] | None:
    """``(dim, start, length, offset)`` of the checkpoint tensor this rank keeps, or None for none of it."""
    raise NotImplementedError
