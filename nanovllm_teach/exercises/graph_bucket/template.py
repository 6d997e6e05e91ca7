"""Exercise ``graph_bucket`` — which CUDA graph a decode step replays: the batch-size bucket.

On a GPU, launching a decode step's hundreds of small kernels one by one costs more than computing them.
So at start-up the model runner *captures* the decode forward pass as CUDA graphs, one per batch size in a
list of buckets (``graph_batch_sizes`` in ``nanovllm_teach/engine/cuda_graphs.py``: 1, 2, 4, 8, then 16,
32, 48, ... up to the sequence cap), and at each decode step *replays* one of them: a single launch. A graph
replays exactly the batch size it was captured with, so a smaller batch is padded up to it (the padding's
rows compute nothing useful).

Write ``choose_graph_batch_size(is_prefill, batch_size, graph_sizes)``: the batch size of the graph this step
replays, or ``None`` to run the step eagerly (kernel by kernel). ``graph_sizes`` lists the captured sizes in
ascending order (empty when no graph was captured).

Facts you need:

- A prefill step never replays a graph: its shapes (tokens per sequence) change from step to step.
- A graph can hold a batch only if it is at least as large; padding wastes work, so less padding is better.
- A batch larger than every captured graph runs eagerly.

Example: with ``graph_sizes == [1, 2, 4, 8, 16, 32]``, a decode batch of 5 sequences replays the graph of 8.

It is graded on the simulated engine (an NVIDIA L4, where graphs are used): every step's ``CUDAGRAPH_REPLAY``
(or eager ``RUN_MODEL``) event is compared with the reference's. Grade it:
``nanovllm-teach grade graph_bucket graph_bucket.py``. Stuck? ``hint("graph_bucket", 1)`` says where to look,
``hint("graph_bucket", 2)`` how.

中文说明：

练习 ``graph_bucket``——解码（decode）步重放哪一个 CUDA Graph：批大小的档位（bucket）。

在 GPU 上，把一个解码步的几百个小 kernel 逐个启动，花的时间比计算它们还多。
所以模型运行器（model runner）在启动时把解码的前向计算*捕获*成 CUDA Graph，
为一列档位中的每个批大小各捕获一个（``nanovllm_teach/engine/cuda_graphs.py`` 中的
``graph_batch_sizes``：1、2、4、8，然后 16、32、48……直到序列数上限），
并在每个解码步*重放*其中之一：只需启动一次。一个图只能按捕获时的批大小重放，
所以更小的 batch 会被补齐到这个大小（补齐的那些行不做有用的计算）。

写出 ``choose_graph_batch_size(is_prefill, batch_size, graph_sizes)``：
返回这一步要重放的图的批大小，或者返回 ``None`` 表示这一步以 eager 方式（逐个 kernel）运行。
``graph_sizes`` 按升序列出已捕获的大小（没有捕获任何图时为空）。

你需要知道的事实：

- 预填充（prefill）步从不重放图：它的形状（每个序列的 token 数）每一步都在变。
- 只有不小于 batch 的图才装得下它；补齐会浪费计算，所以补得越少越好。
- 比所有已捕获的图都大的 batch 以 eager 方式运行。

例：``graph_sizes == [1, 2, 4, 8, 16, 32]`` 时，有 5 条序列的解码 batch 重放大小为 8 的图。

它在模拟引擎上评分（NVIDIA L4，会使用图）：每一步的 ``CUDAGRAPH_REPLAY``
（或 eager 的 ``RUN_MODEL``）事件都与参考实现的比较。
评分：``nanovllm-teach grade graph_bucket graph_bucket.py``。
卡住了？``hint("graph_bucket", 1)`` 告诉你该看哪里，``hint("graph_bucket", 2)`` 告诉你该怎么做。
"""

from __future__ import annotations


def choose_graph_batch_size(is_prefill: bool, batch_size: int, graph_sizes: list[int]) -> int | None:
    """The batch size of the graph this step replays, or None to run it eagerly."""
    raise NotImplementedError
