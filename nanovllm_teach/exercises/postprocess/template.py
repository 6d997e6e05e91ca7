"""Exercise ``postprocess`` — after the model ran: cached K/V, new tokens, and when a request is finished.

The model runner has computed the step's batch and sampled one token per sequence. ``Scheduler.postprocess``
(``nanovllm_teach/engine/scheduler.py``) takes the result in: it is the last third of every engine step.

For each sequence of the batch, in order (``scheduler.accepted[entry.seq_id]`` is the sequence of the batch
entry ``entry``; ``token_ids`` has one token per entry):

1. Its K/V for the ``seq.num_scheduled_tokens`` tokens just computed is now in the cache: let the block
   manager name the blocks that became full (``bm.hash_blocks(seq)``, *before* anything else changes),
   then count those tokens as cached and nothing as scheduled any more.
2. If the sequence has still not computed its whole prompt, the step was a chunk of it: the sampled token
   means nothing and is dropped. Otherwise the token is appended (``seq.append_token``).
3. Then decide whether the sequence is finished, and why (``seq.finish_reason``), checking in this order:
   ``"eos"`` if the token is the end-of-sequence token ``scheduler.eos`` and the request does not ask to
   ignore it (``seq.ignore_eos``); ``"length"`` once it has ``seq.max_tokens`` completion tokens;
   ``"max_model_len"`` once it holds ``scheduler.max_model_len`` tokens.
4. A finished sequence leaves the engine: ``scheduler.finish(seq, reason)`` sets its state and reason,
   takes it out of ``scheduler.accepted`` and ``scheduler.running``, gives its blocks back, and returns
   what it decided (the ``Finished`` record, then the ``Freed`` blocks).

Return the decisions you took, in order: every record ``scheduler.finish`` returned (an empty list when
nobody finished). The scheduler keeps no log of its decisions: what it decided is what its methods return,
and the engine turns those records into TEACHING events. ``bm`` is ``scheduler.block_manager``.

Example: ``max_tokens=3``, ``ignore_eos=False``; the request has 2 completion tokens and samples the EOS
token: it finishes with ``"eos"``. The same request with ``ignore_eos=True`` finishes with ``"length"``:
the EOS token is kept as its third completion token.

Grade it: ``nanovllm-teach grade postprocess postprocess.py``. The grader runs the real engine with your
function in place of ``Scheduler.postprocess`` and compares its decisions, as TEACHING
events, with the reference's.
Stuck? ``hint("postprocess", 1)`` says where to look, ``hint("postprocess", 2)`` how.

中文说明：

练习 ``postprocess``——模型运行之后：已缓存的 K/V、新 token，以及请求何时结束。

模型运行器（model runner）已经算完了这一步的 batch，并为每个序列采样了一个 token。
``Scheduler.postprocess``（``nanovllm_teach/engine/scheduler.py``）负责接收这个结果：
它是每个引擎步的最后三分之一。

对 batch 中的每个序列，按顺序执行以下操作（``scheduler.accepted[entry.seq_id]`` 是 batch 条目 ``entry`` 对应
的序列；``token_ids`` 中每个条目对应一个 token）：

1. 它刚算出的 ``seq.num_scheduled_tokens`` 个 token 的 K/V 现在已在缓存中：
   先让块管理器（block manager）为刚变满的块命名（``bm.hash_blocks(seq)``，
   必须在其他任何状态改变*之前*调用），再把这些 token 计为已缓存，并把已调度的 token 数清零。
2. 如果序列还没有算完它的整个 prompt，这一步就只是 prompt 的一个分块：采样出的 token 没有意义，直接丢弃。
   否则，把这个 token 追加到序列中（``seq.append_token``）。
3. 然后判断序列是否结束以及结束的原因（``seq.finish_reason``），按以下顺序检查：
   如果这个 token 是序列结束 token ``scheduler.eos``，且请求没有要求忽略它（``seq.ignore_eos``），
   原因是 ``"eos"``；一旦它有了 ``seq.max_tokens`` 个补全 token，原因是 ``"length"``；
   一旦它持有 ``scheduler.max_model_len`` 个 token，原因是 ``"max_model_len"``。
4. 结束的序列离开引擎：``scheduler.finish(seq, reason)`` 设置它的状态和原因，
   把它从 ``scheduler.accepted`` 和 ``scheduler.running`` 中移除，归还它的块，
   并返回它做出的决策（先是 ``Finished`` 记录，然后是 ``Freed`` 记录）。

按顺序返回你做出的决策：``scheduler.finish`` 返回的全部记录（没有序列结束时返回空列表）。
调度器（scheduler）不再把决策写进日志：它决定了什么，就是它的方法返回了什么，
引擎再把这些记录变成 TEACHING 事件。
``bm`` 即 ``scheduler.block_manager``。

例：``max_tokens=3``，``ignore_eos=False``；请求已有 2 个补全 token，这一步采样到了 EOS token：
它以 ``"eos"`` 结束。同一个请求若设置 ``ignore_eos=True``，则以 ``"length"`` 结束：EOS token 被保留下来，
成为它的第三个补全 token。

评分：``nanovllm-teach grade postprocess postprocess.py``。评分器运行真实的引擎，
用你的函数替换 ``Scheduler.postprocess``，并把它的决策（以 TEACHING 事件的形式）与参考实现的决策进行比较。
卡住了？``hint("postprocess", 1)`` 告诉你该看哪里，``hint("postprocess", 2)`` 告诉你该怎么做。
"""

from __future__ import annotations

from nanovllm_teach.engine.batch import ScheduledBatch
from nanovllm_teach.engine.decisions import Decision
from nanovllm_teach.engine.scheduler import Scheduler


def postprocess(scheduler: Scheduler, batch: ScheduledBatch, token_ids: list[int]) -> list[Decision]:
    """Take in one step's sampled tokens; returns the finishes, each with the blocks it gave back."""
    raise NotImplementedError
