"""Exercise ``scheduling_policy``: design a scheduling policy, graded by the latency it achieves.

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference.
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.exercises.engine_grading import Piece
from nanovllm_teach.exercises.scheduling_policy.grading import PolicyExercise
from nanovllm_teach.exercises.scheduling_policy.workloads import POLICY_WORKLOADS
from nanovllm_teach.exercises.scheduling_policy.wire import WaitingSeq
from nanovllm_teach.exercises.worker import is_int
from nanovllm_teach.i18n import Text, say

ORDER = 140  # the course's order (``nanovllm-teach exercises``): design, last


# What the check says, after "your choose_next " / "你的 choose_next " in the verdict.
NOT_AN_INDEX = Text(en="returned {value!r}: it must return the index (an int from 0 to {last}) of one of the {count} "
                       "waiting sequences",
                    zh="返回了 {value!r}：它必须返回 {count} 个等待中的序列之一的下标（0 到 {last} 的 int）")


def _check_index(args: tuple[Any, ...], result: Any) -> str | None:
    (waiting,) = args
    if not is_int(result) or not 0 <= result < len(waiting):
        return say(NOT_AN_INDEX, value=result, last=len(waiting) - 1, count=len(waiting))
    return None


def _waiting_seqs(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The waiting queue as the sandboxed policy receives it: the facts the template names, in order."""
    (waiting,) = args
    return ([WaitingSeq(s.seq_id, s.num_prompt_tokens, s.num_tokens, s.num_preemptions) for s in waiting],)


TITLE = Text(en='Design a scheduling policy: who is admitted next',
             zh='设计一个调度策略：下一个接纳谁')
# Hints from the gentlest to the strongest; none of them is the code.
HINTS = (
    Text(en=("Mean TTFT is a sum of waits: while one request's prefill runs, every request behind it "
             'waits. Which requests cost the others the least when they go first? Then look at the '
             'steady_stream row: who waits the longest under your policy, and why does nobody ever '
             'let it in?'),
         zh=('平均首 token 延迟（TTFT）是等待时间之和：一个请求做预填充时，排在它后面的请求都在等。哪些请求先走，'
             '对其他请求的代价最小？然后看 steady_stream 那一行：'
             '在你的策略下谁等得最久？为什么始终没人让它进去？')),
    Text(en=('Admit the waiting sequence with the fewest prompt tokens (num_prompt_tokens) first, and '
             'add aging so that nobody is passed over forever: seq_id grows with arrival order, so '
             "the newest seq_id in waiting minus a sequence's seq_id counts the requests that arrived "
             'after it; once that count is large (a few dozen), let the oldest go first.'),
         zh=('先接纳 prompt token 最少（num_prompt_tokens）的等待序列，再加上老化机制，'
             '让谁都不会被永远跳过：seq_id 随到达顺序增长，所以 waiting 中最新的 seq_id '
             '减去某个序列的 seq_id，就是在它之后到达的请求数；一旦这个数很大（几十个），'
             '就让最老的先走。')),
)


EXERCISE = PolicyExercise(
    "scheduling_policy", TITLE, "scheduler.choose_next",
    ("choose_next",),
    HINTS,
    (Piece("choose_next", "nanovllm_teach.engine.scheduler:choose_next", _check_index,
           wire=("list[nanovllm_teach.exercises.scheduling_policy.wire:WaitingSeq]",), encode=_waiting_seqs),),
    tuple(POLICY_WORKLOADS.values()))

