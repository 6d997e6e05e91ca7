"""Exercise ``schedule_decode``: decode scheduling with preemption.

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference.
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.exercises.engine_grading import EngineExercise, Piece
from nanovllm_teach.exercises.schedule_decode.workloads import SEQ_CAP
from nanovllm_teach.exercises.schedule_prefill import check_scheduled
from nanovllm_teach.exercises.snapshots import StateWire
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.step_workloads import LATE_ARRIVALS, TIGHT_CACHE

ORDER = 20  # the course's order (``nanovllm-teach exercises``): after the prefill's schedule


# What the check says, after "your schedule_decode " / "你的 schedule_decode " in the verdict.
EMPTY_DECODE = Text(en="scheduled no sequence: a decode step must run at least one (when every other one is "
                       "preempted, the last one left runs)",
                    zh="没有调度任何序列：一个解码步至少要运行一个序列（其他序列都被抢占时，剩下的最后一个照样运行）")


def _check_schedule(args: tuple[Any, ...], result: Any) -> str | None:
    problem = check_scheduled(args, result)
    if problem is None and not result[0]:
        return say(EMPTY_DECODE)
    return problem


TITLE = Text(en='Decode scheduling with preemption',
             zh='带抢占的解码调度')
# Hints from the gentlest to the strongest; none of them is the code.
HINTS = (
    Text(en=("Two queues' ends matter: which end of scheduler.running do you take the next sequence "
             'from, and which end gives way when blocks run out? Read Scheduler.preempt to see what '
             'preempting does.'),
         zh=('两个队列的两端很关键：下一个序列从 scheduler.running 的哪一端取？块用完时，'
             '哪一端让路？读一读 Scheduler.preempt，看看抢占做了什么。')),
    Text(en=('Loop while running is not empty and you have fewer than max_num_seqs; inside, loop '
             'while can_append(seq) says no: preempt running.pop() if anyone is left, else seq itself '
             '(and skip it). Scheduled sequences go back to the head of running, in order. Collect '
             'what preempt returns and what may_append returns (when not None); return (scheduled, '
             'decisions).'),
         zh=('当 running 不为空且已调度的序列少于 max_num_seqs 时循环；在循环里，只要 can_append(seq) '
             '返回 False 就继续：如果还有别的序列，就抢占 running.pop()，否则抢占 seq 自己（并跳过它）'
             '。已调度的序列按原顺序放回 running 的队首。把 preempt 返回的记录和 may_append 返回的记录'
             '（不是 None 时）收集起来，最后返回 (scheduled, decisions)。')),
)


EXERCISE = EngineExercise(
    "schedule_decode", TITLE, "Scheduler.schedule_decode",
    ("schedule_decode",),
    HINTS,
    (Piece("schedule_decode", "nanovllm_teach.engine.scheduler:Scheduler.schedule_decode", _check_schedule,
           state=StateWire("scheduler")),),
    (TIGHT_CACHE, SEQ_CAP, LATE_ARRIVALS))
