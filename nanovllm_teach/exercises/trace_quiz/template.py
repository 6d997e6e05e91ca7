"""Exercise ``trace_quiz`` — reading a trace.

A trace is the whole story of a run: every decision the engine took, as TEACHING events, and the tables
derived from them (``trace.steps``: one ``StepRow`` per engine step; ``trace.requests``: one ``RequestRow``
per request; ``trace.events``: everything). This quiz asks about one recorded run: 8 requests arriving over
12 steps into a KV cache of 20 blocks of 4 tokens, at most 4 sequences per step.

Get the trace and look at it (in a notebook, or ``python -i``)::

    from nanovllm_teach.exercises import quiz_trace
    from nanovllm_teach.trace import format_request_table, format_step_table
    trace = quiz_trace()
    print(format_step_table(trace.steps)); print(format_request_table(trace.requests))

Answer each question with an int, under its key:

- ``num_steps``: how many engine steps did the run take?
- ``num_decode_steps``: how many of those steps were decode steps?
- ``max_decode_batch``: what was the largest batch a decode step ran?
- ``peak_used_blocks``: what is the largest number of KV blocks in use at the end of a step?
- ``first_preemption_step``: in which step was a sequence preempted for the first time?
- ``first_preempted_seq``: which seq_id was preempted first?
- ``num_preemptions``: how many preemptions happened in all?
- ``last_finish_step``: in which step did the last request finish?

Return the numbers you read off (``return {"num_steps": 42, ...}``), or compute them from ``trace`` — both
are reading the trace. Grade it: ``nanovllm-teach grade trace_quiz trace_quiz.py``.
Stuck? ``hint("trace_quiz", 1)`` says where to look, ``hint("trace_quiz", 2)`` how.

中文说明：

练习 ``trace_quiz``——读 trace。

trace 是一次运行的完整记录：引擎做出的每一个决策（以 TEACHING 事件的形式），
以及由这些事件导出的表（``trace.steps``：每个引擎步一个 ``StepRow``；``trace.requests``：
每个请求一个 ``RequestRow``；``trace.events``：全部事件）。这个测验问的是一次录制好的运行：
8 个请求在 12 步内陆续到达，进入一个有 20 个块、每块 4 个 token 的 KV 缓存（KV cache），
每步最多运行 4 个序列。

获取这个 trace 并查看它（在 notebook 中，或用 ``python -i``）::

    from nanovllm_teach.exercises import quiz_trace
    from nanovllm_teach.trace import format_request_table, format_step_table
    trace = quiz_trace()
    print(format_step_table(trace.steps)); print(format_request_table(trace.requests))

每道题用一个 int 作答，放在该题的键下：

- ``num_steps``：这次运行一共走了多少个引擎步？
- ``num_decode_steps``：其中有多少步是解码（decode）步？
- ``max_decode_batch``：解码步运行过的最大 batch 有多大？
- ``peak_used_blocks``：在某一步结束时，正在使用的 KV 块最多有多少个？
- ``first_preemption_step``：序列第一次被抢占（preempted）是在哪一步？
- ``first_preempted_seq``：最先被抢占的是哪个 seq_id？
- ``num_preemptions``：一共发生了多少次抢占？
- ``last_finish_step``：最后一个请求在哪一步完成？

返回你读出的数（``return {"num_steps": 42, ...}``），或者从 ``trace`` 把它们算出来——两种做法都是在读 trace。
评分：``nanovllm-teach grade trace_quiz trace_quiz.py``。
卡住了？``hint("trace_quiz", 1)`` 告诉你该看哪里，``hint("trace_quiz", 2)`` 告诉你该怎么做。
"""

from __future__ import annotations

from nanovllm_teach.trace import Trace


def answer_quiz(trace: Trace) -> dict[str, int]:
    """Your answers, one int per question key."""
    raise NotImplementedError
