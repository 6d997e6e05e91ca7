"""Exercise ``schedule_prefill`` — admitting waiting requests: the token budget, chunking, the prefix cache.

Every engine step first tries to *prefill*: to admit requests from ``scheduler.waiting`` and compute their
prompts. This is the first half of ``Scheduler.schedule`` (``nanovllm_teach/engine/scheduler.py``). Your
function chooses the sequences of this prefill step and how many tokens each computes.

The rules, in order, for as long as ``waiting`` is not empty and fewer than ``max_seqs`` are scheduled:

1. The sequence to consider is ``scheduler.next_waiting()`` (the head of ``waiting`` once the
   scheduling policy has had its say). Only ``max_num_batched_tokens`` tokens may be computed in the whole
   step: stop when none of the budget is left.
2. A sequence that holds blocks already (``seq.block_table`` is not empty) is part-way through its prompt:
   it computes the rest, ``seq.num_tokens - seq.num_cached_tokens``. Any other sequence needs its blocks
   first: ``bm.can_allocate(seq)`` says how many of its leading blocks are already in the prefix cache, or
   -1 when there are not enough free blocks (then stop: it waits for the next step, and so does everyone
   behind it). The cached blocks' tokens are not computed again.
3. Only the first sequence of a step may be *chunked*: if the tokens a later one needs do not fit in what
   is left of the budget, stop. The first one computes as much as fits.
4. An admitted sequence gets its blocks from the block manager's ``allocate``, given the number of
   cached blocks (it also counts the cached tokens, and returns what it handed out as an ``Allocated``
   record: keep it), and its ``num_scheduled_tokens``. If that finishes its prompt, it is ``SequenceStatus.RUNNING``
   and leaves ``waiting`` (from the head) for the tail of ``running``. A chunked sequence stays at the head
   of ``waiting``.

Return two things: the scheduled sequences in the order you took them (an empty list when nobody could be
admitted: the step is then a decode), and the ``Allocated`` records ``allocate`` returned, in order. The
scheduler keeps no log of its decisions: what it decided is what its methods return, and the engine turns
those records into TEACHING events. ``max_seqs``, from ``scheduler.admission_cap()``, is ``max_num_seqs`` or
fewer under the static policy; ``bm`` is ``scheduler.block_manager``, whose blocks hold ``bm.block_size``
tokens each.

Example: budget 16, block size 4, ``waiting`` holds A (10 tokens, its first 8 cached) and B (12 tokens,
nothing cached). A computes 2 tokens and moves to ``running``; B needs 12 and 14 remain, so B fits and
moves too: 14 tokens this step. Had B needed 15, it would have waited for the next step.

Grade it: ``nanovllm-teach grade schedule_prefill schedule_prefill.py``. The grader runs the real engine
with your function in place of ``Scheduler.schedule_prefill`` and compares its decisions, as TEACHING
events, with the reference's.
Stuck? ``hint("schedule_prefill", 1)`` says where to look, ``hint("schedule_prefill", 2)`` how.

中文说明：

练习 ``schedule_prefill``——接纳等待中的请求：token 预算、分块、前缀缓存（prefix cache）。

每个引擎步都先尝试*预填充（prefill）*：从 ``scheduler.waiting`` 接纳请求，并计算它们的 prompt。
这是 ``Scheduler.schedule`` 的前半部分（``nanovllm_teach/engine/scheduler.py``）。
你的函数选出这个预填充步的序列，并决定每个序列计算多少个 token。

只要 ``waiting`` 不为空，且已调度的序列少于 ``max_seqs`` 个，就按顺序执行以下规则：

1. 要考虑的序列是 ``scheduler.next_waiting()``（调度策略发表意见之后 ``waiting`` 的队头）。
   整个步最多只能计算 ``max_num_batched_tokens`` 个 token：预算用完时就停止。
2. 已经持有块的序列（``seq.block_table`` 不为空）已经算完了 prompt 的一部分：它计算剩下的部分，
   即 ``seq.num_tokens - seq.num_cached_tokens`` 个 token。其他序列需要先获得块：
   ``bm.can_allocate(seq)`` 给出它开头有多少个块已经在前缀缓存中；空闲块不够时，它返回 -1（这时停止：
   这个序列等到下一步，排在它后面的所有序列也一样）。已缓存块中的 token 不会再计算一次。
3. 只有一步中的第一个序列可以*分块*：如果后面某个序列需要的 token 放不进剩余的预算，就停止。
   第一个序列则是能放下多少就计算多少。
4. 被接纳的序列从块管理器（block manager）的 ``allocate`` 获得它的块（传入已缓存的块数，
   ``allocate`` 也会统计已缓存的 token，并把分出去的块作为一条 ``Allocated`` 记录返回：把它留下来），
   并设置它的 ``num_scheduled_tokens``。如果这样就算完了它的 prompt，
   它的状态变为 ``SequenceStatus.RUNNING``，并从 ``waiting`` 的队头离开，进入 ``running`` 的队尾。
   被分块的序列留在 ``waiting`` 的队头。

返回两样东西：按你取出的顺序排列的被调度序列（没有任何序列能被接纳时返回空列表：
这一步就成为解码（decode）步），以及 ``allocate`` 依次返回的 ``Allocated`` 记录。
调度器（scheduler）不再把决策写进日志：它决定了什么，就是它的方法返回了什么，
引擎再把这些记录变成 TEACHING 事件。
``max_seqs`` 来自 ``scheduler.admission_cap()``，它等于 ``max_num_seqs``，在静态策略下可能更少；
``bm`` 即 ``scheduler.block_manager``，它的每个块保存 ``bm.block_size`` 个 token。

例：预算为 16，块大小为 4，``waiting`` 中有 A（10 个 token，前 8 个已缓存）和 B（12 个 token，没有缓存）。
A 计算 2 个 token 并进入 ``running``；B 需要 12 个，而剩余预算还有 14 个，所以 B 放得下，
也进入 ``running``：这一步共计算 14 个 token。假如 B 需要 15 个，它就要等到下一步。

评分：``nanovllm-teach grade schedule_prefill schedule_prefill.py``。评分器运行真实的引擎，
用你的函数替换 ``Scheduler.schedule_prefill``，
并把它的决策（以 TEACHING 事件的形式）与参考实现的决策进行比较。
卡住了？``hint("schedule_prefill", 1)`` 告诉你该看哪里，``hint("schedule_prefill", 2)`` 告诉你该怎么做。
"""

from __future__ import annotations

from nanovllm_teach.engine.decisions import Allocated
from nanovllm_teach.engine.scheduler import Scheduler
from nanovllm_teach.engine.sequence import Sequence, SequenceStatus


def schedule_prefill(scheduler: Scheduler) -> tuple[list[Sequence], list[Allocated]]:
    """The sequences this prefill step computes, each with its ``num_scheduled_tokens`` set, and the blocks
    the newly admitted ones were given."""
    raise NotImplementedError
