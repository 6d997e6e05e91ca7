"""Exercise ``schedule_decode`` — decode scheduling with preemption.

When nothing is waiting to be prefilled, every engine step is a *decode* step: each running sequence
computes exactly one more token. Your job is to choose those sequences, and to make room when the KV cache
is full. This is the second half of ``Scheduler.schedule`` (``nanovllm_teach/engine/scheduler.py``: ``schedule_decode``).

The rules, in order:

1. Take sequences from the *head* of ``scheduler.running`` (the oldest first) until it is empty or you have
   ``scheduler.max_num_seqs`` of them.
2. A sequence may run only if ``scheduler.block_manager.can_append(seq)``: its newest token may start a new
   KV block, and then a free block must exist. While it cannot run, free a block by *preempting* the
   newest sequence, the one at the *tail* of ``running``: ``scheduler.preempt(victim, needed_by=seq)``.
   (Preemption by recompute: the victim gives back its blocks and returns to the waiting queue;
   ``preempt`` returns what it decided, the ``Freed`` blocks and the ``Preempted`` record.)
   If nobody is left to preempt, preempt ``seq`` itself and move on.
3. A sequence that may run is scheduled for one token (its ``num_scheduled_tokens``) and gets its new
   block, if it needs one, from ``scheduler.block_manager.may_append`` (which returns an ``Allocated``
   record when it gave one, None when none was needed).
4. At the end, the scheduled sequences are back at the head of ``running``, in the order they were
   taken. Return two things: the scheduled sequences in that order, and every decision record the calls
   returned, in the order they were made. The scheduler keeps no log of its decisions: what it decided
   is what its methods return, and the engine turns those records into TEACHING events.

``scheduler.running`` is a ``collections.deque``: ``popleft()`` takes the oldest, ``pop()`` the newest.

Grade it: ``nanovllm-teach grade schedule_decode schedule_decode.py``. The grader runs the real engine
with your function in place of ``Scheduler.schedule_decode`` and compares its decisions, as TEACHING
events, with the reference's.
Stuck? ``hint("schedule_decode", 1)`` says where to look, ``hint("schedule_decode", 2)`` how.

中文说明：

练习 ``schedule_decode``——带抢占（preemption）的解码（decode）调度。

当没有等待预填充（prefill）的序列时，每个引擎步都是*解码*步：每个运行中的序列恰好再计算一个 token。
你的任务是选出这些序列，并在 KV 缓存（KV cache）满了的时候腾出空间。
这是 ``Scheduler.schedule`` 的后半部分（``nanovllm_teach/engine/scheduler.py`` 中的 ``schedule_decode``）。

规则如下，按顺序执行：

1. 从 ``scheduler.running`` 的*队头*（最早的序列）开始取序列，直到它为空，
   或者你已经取了 ``scheduler.max_num_seqs`` 个。
2. 只有当 ``scheduler.block_manager.can_append(seq)`` 为真时，一个序列才可以运行：
   它最新的 token 可能开启一个新的 KV 块，这时必须有一个空闲块。只要它还不能运行，就*抢占*最新的序列，
   即 ``running`` *队尾*的那个，来释放块：``scheduler.preempt(victim, needed_by=seq)``。
   （这是通过重计算（recompute）实现的抢占：被抢占者归还它的块，回到等待队列；
   ``preempt`` 返回它做出的决策：``Freed`` 记录（归还的块）和 ``Preempted`` 记录。）
   如果已经没有可以抢占的序列，就抢占 ``seq`` 自己，然后继续处理下一个。
3. 可以运行的序列被调度计算一个 token（即它的 ``num_scheduled_tokens``），如果需要新块，
   就通过 ``scheduler.block_manager.may_append`` 获得（分了新块时它返回一条 ``Allocated`` 记录，
   不需要新块时返回 None）。
4. 最后，被调度的序列按取出时的顺序回到 ``running`` 的队头。返回两样东西：按这个顺序排列的被调度序列，
   以及这些调用依次返回的全部决策记录。调度器（scheduler）不再把决策写进日志：
   它决定了什么，就是它的方法返回了什么，引擎再把这些记录变成 TEACHING 事件。

``scheduler.running`` 是一个 ``collections.deque``：``popleft()`` 取出最早的序列，``pop()`` 取出最新的序列。

评分：``nanovllm-teach grade schedule_decode schedule_decode.py``。评分器运行真实的引擎，
用你的函数替换 ``Scheduler.schedule_decode``，
并把它的决策（以 TEACHING 事件的形式）与参考实现的决策进行比较。
卡住了？``hint("schedule_decode", 1)`` 告诉你该看哪里，``hint("schedule_decode", 2)`` 告诉你该怎么做。
"""

from __future__ import annotations

from nanovllm_teach.engine.decisions import Decision
from nanovllm_teach.engine.scheduler import Scheduler
from nanovllm_teach.engine.sequence import Sequence


def schedule_decode(scheduler: Scheduler) -> tuple[list[Sequence], list[Decision]]:
    """The sequences that decode one token each in this step, in order (never empty), and the decisions
    taken on the way."""
    raise NotImplementedError
