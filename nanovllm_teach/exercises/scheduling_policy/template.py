"""Exercise ``scheduling_policy`` — design a scheduling policy: who is admitted next.

Every step, the scheduler (``Scheduler.schedule_prefill`` in ``nanovllm_teach/engine/scheduler.py``) admits
waiting sequences into the step's prefill while its token budget (``max_num_batched_tokens``), the sequence
cap and the free KV blocks allow. *Which* waiting sequence goes next is the policy's choice: the function
``choose_next`` in the same file. The engine's own policy is first come, first served (FCFS): it returns 0,
the head of the queue, the oldest arrival.

There is no single right answer here. The grader runs your policy in the real scheduler, on the simulated
engine (Qwen3-0.6B on an NVIDIA L4, predicted step times: the same numbers on every machine), on three
workloads of requests arriving over time with prompts from 40 to 1900 tokens, and compares the latency
with FCFS's on the same workloads. On each workload your policy passes when:

- its mean time to first token (TTFT) is at least 20% below FCFS's, and
- no request waits for its first token longer than 1.5 times FCFS's slowest request (nobody starves),

and every request finishes. The verdict is a table per workload, FCFS against yours.

The contract: ``choose_next(waiting)`` gets the waiting queue, a list of records of the waiting sequences
(your code runs in a sandbox, apart from the engine) in arrival order (a preempted sequence is put back at
the head), never empty, and returns the
*index* of the sequence to admit next (an int, ``0 <= index < len(waiting)``). Do not change ``waiting``
itself: the scheduler moves the one you chose. It is called once per admission, so several times a step.
What a sequence knows that may help: ``seq_id`` (grows with arrival order), ``num_prompt_tokens``,
``num_tokens``, ``num_preemptions``. It must be a function of what it is given (no clocks, no randomness).

Example: with three waiting sequences whose prompts have 900, 30 and 400 tokens (seq_ids 4, 5, 6), FCFS
returns 0 and "last come, first served" returns 2. Think about what each choice makes the others wait for,
and then about the request that every choice you make passes over.

Grade it: ``nanovllm-teach grade scheduling_policy scheduling_policy.py``
(or ``check("scheduling_policy", choose_next)``).
Stuck? ``hint("scheduling_policy", 1)`` says where to look, ``hint("scheduling_policy", 2)`` how.

中文说明：

练习 ``scheduling_policy``——设计一个调度策略：下一个接纳谁。

每一步，调度器（scheduler，即 ``nanovllm_teach/engine/scheduler.py`` 中的 ``Scheduler.schedule_prefill``）
在 token 预算（``max_num_batched_tokens``）、序列数上限和空闲 KV 块允许的范围内，
把等待中的序列接纳进这一步的预填充（prefill）。下一个接纳*哪个*等待序列，由策略决定：
即同一文件中的函数 ``choose_next``。引擎自己的策略是先来先服务（FCFS）：它返回 0，即队头、最早到达的序列。

这道题没有唯一的正确答案。评分器在真实的调度器中、在模拟引擎上运行你的策略（Qwen3-0.6B 跑在 NVIDIA L4 上，
步耗时是预测值：在每台机器上数字都相同），使用三个工作负载（workload），其中的请求陆续到达，
prompt 长度从 40 到 1900 个 token 不等，并在同样的工作负载上将延迟与 FCFS 比较。在每个工作负载上，
你的策略通过的条件是：

- 平均首 token 延迟（time to first token，TTFT）比 FCFS 的低至少 20%，并且
- 没有任何请求等待首个 token 的时间超过 FCFS 最慢请求的 1.5 倍（没有请求被饿死），

并且每个请求都能完成。评语是每个工作负载一张表，FCFS 与你的策略并列对比。

约定：``choose_next(waiting)`` 接收等待队列，即一个按到达顺序排列、
由各等待序列的记录组成的 list（你的代码在与引擎隔开的沙箱里运行；被抢占（preempted）的序列会放回队头），
它永远不为空；
函数返回下一个要接纳的序列的*下标*（一个 int，``0 <= index < len(waiting)``）。不要修改 ``waiting`` 本身：
调度器会把你选中的那个序列移走。每次接纳都会调用它一次，所以一步中会调用多次。序列所知道的、
可能有帮助的信息有：``seq_id``（随到达顺序增大）、``num_prompt_tokens``、``num_tokens``、
``num_preemptions``。它必须只取决于传给它的参数（不能用时钟，也不能用随机数）。

例：有三个等待序列，prompt 分别有 900、30 和 400 个 token（seq_id 为 4、5、6），FCFS 返回 0，
而“后来先服务”返回 2。想一想每一种选择会让其他请求为什么而等待，再想一想那个被你的每一次选择都跳过的请求。

评分：``nanovllm-teach grade scheduling_policy scheduling_policy.py``（或
``check("scheduling_policy", choose_next)``）。
卡住了？``hint("scheduling_policy", 1)`` 告诉你该看哪里，``hint("scheduling_policy", 2)`` 告诉你该怎么做。
"""

from __future__ import annotations

from nanovllm_teach.engine.sequence import Sequence


def choose_next(waiting: list[Sequence]) -> int:
    """The index in ``waiting`` of the sequence to admit next."""
    raise NotImplementedError
