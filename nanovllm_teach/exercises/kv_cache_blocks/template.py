"""Exercise ``kv_cache_blocks`` — sizing the KV cache: bytes per block, blocks per budget.

At start-up the model runner (``ModelRunner.allocate_kv_cache``) runs one warm-up (the largest prefill step
the scheduler can form, then sampling ``max_num_seqs`` rows of logits) to see the step's peak memory, then gives the KV cache what is left, as whole blocks. Two functions:

1. ``kv_block_bytes``: one block holds ``block_size`` tokens; for each token, each layer keeps what
   attention needs later of every KV head: a key vector and a value vector of ``head_dim`` numbers, each
   number ``dtype_bytes`` bytes. Example: 2 layers, blocks of 4 tokens, 2 KV heads of dimension 8 in
   2-byte numbers: 512 bytes.
2. ``kv_cache_blocks``: the cache may have the ``utilization`` share of the device's ``total`` memory,
   less what is taken already: everything in use on the device now (``used``), and the extra room a
   forward pass needs on top of what this process holds now (``peak`` is this process at the height of
   the warm-up, ``current`` this process now). That budget is truncated to whole bytes (an int) and, on a
   CPU, whose RAM the rest of the machine shares, capped at ``cpu_cap_bytes`` (None on a GPU: no cap). The
   answer is the number of *whole* blocks that fit; none fit when the budget is negative. Example: total
   1000, utilization 0.5, used 300, peak 150, current 100, blocks of 40 bytes, no cap: 3 blocks.

Write the formulas from the fields (not by calling ``MemoryReading.available`` or ``utils.memory``'s own
helpers). The grader replaces the machine's memory reading with a fixed one, so the numbers are the same
on every machine. Grade it: ``nanovllm-teach grade kv_cache_blocks kv_cache_blocks.py``.
Stuck? ``hint("kv_cache_blocks", 1)`` says where to look, ``hint("kv_cache_blocks", 2)`` how.

中文说明：

练习 ``kv_cache_blocks``——确定 KV 缓存（KV cache）的大小：每块的字节数，预算内的块数。

启动时，模型运行器（model runner，``ModelRunner.allocate_kv_cache``）先运行一次预热（warm-up）：
做一次调度器（scheduler）所能组成的最大预填充（prefill）step，
再对 ``max_num_seqs`` 行 logits 做采样，以测出一步的峰值内存；
然后把剩下的内存以整块的形式分给 KV 缓存。要写两个函数：

1. ``kv_block_bytes``：一个块保存 ``block_size`` 个 token；对每个 token，
   每一层都要为每个 KV 头保存注意力之后要用到的内容：一个 key 向量和一个 value 向量，
   各有 ``head_dim`` 个数，每个数占 ``dtype_bytes`` 字节。例：2 层，每块 4 个 token，2 个维度为 8 的 KV 头，
   每个数 2 字节：512 字节。
2. ``kv_cache_blocks``：KV 缓存最多可以使用设备总内存 ``total`` 中 ``utilization`` 所占的比例，
   再减去已被占用的部分：设备上当前正在使用的全部内存（``used``），
   以及一次前向计算在本进程当前占用之外还需要的额外空间（``peak`` 是本进程在预热最高峰时的占用，
   ``current`` 是本进程当前的占用）。这个预算截断为整数字节（一个 int）；在 CPU 上，
   由于内存与机器上的其他程序共享，预算的上限为 ``cpu_cap_bytes``（在 GPU 上为 None：没有上限）。
   答案是能放下的*完整*块的数量；预算为负时，一个块也放不下。例：total 为 1000，utilization 为 0.5，
   used 为 300，peak 为 150，current 为 100，每块 40 字节，没有上限：3 个块。

请根据这些字段写出公式（不要调用 ``MemoryReading.available`` 或 ``utils.memory`` 自带的辅助函数）。
评分器会用一个固定的读数替换机器的内存读数，因此在每台机器上得到的数字都相同。评分：
``nanovllm-teach grade kv_cache_blocks kv_cache_blocks.py``。
卡住了？``hint("kv_cache_blocks", 1)`` 告诉你该看哪里，``hint("kv_cache_blocks", 2)`` 告诉你该怎么做。
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only its fields are used: the grader passes a record with the same fields
    from nanovllm_teach.utils.memory import MemoryReading


def kv_block_bytes(num_layers: int, block_size: int, num_kv_heads: int, head_dim: int, dtype_bytes: int) -> int:
    """Bytes one KV block takes, over all layers."""
    raise NotImplementedError


def kv_cache_blocks(reading: MemoryReading, utilization: float, block_bytes: int,
                    cpu_cap_bytes: int | None) -> int:
    """How many whole blocks of ``block_bytes`` the KV cache gets."""
    raise NotImplementedError
