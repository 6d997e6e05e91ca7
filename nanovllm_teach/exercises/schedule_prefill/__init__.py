"""Exercise ``schedule_prefill``: admitting prompts: the token budget, chunking and the prefix cache.

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference.
"""

from __future__ import annotations

import reprlib
from typing import Any

from nanovllm_teach.engine.decisions import Decision
from nanovllm_teach.engine.sequence import Sequence
from nanovllm_teach.exercises.engine_grading import EngineExercise, Piece
from nanovllm_teach.exercises.snapshots import StateWire
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.step_workloads import CACHED_UNDER_BUDGET, SHARED_PREFIXES, SMALL_BUDGET, TIGHT_CACHE

ORDER = 10  # the course's order (``nanovllm-teach exercises``): the scheduler's step comes first


# Said after "your <function> " in the verdict (in the grading child, in the language the parent chose). A
# scheduler method returns its decisions (it keeps no log of them): a function written the way the engine used
# to be (the sequences alone) is told what changed, not left to crash the engine.
NOT_SCHEDULED_AND_DECISIONS = Text(
    en="returned {type} {value}: it returns two things, (the scheduled sequences, the decisions taken on the way): "
       "the records that allocate, may_append and preempt return. The scheduler keeps no log of its decisions any "
       "more; what it decided is what it returns",
    zh="返回了 {type} {value}：它要返回两样东西，(被调度的序列, 途中做出的决策)，决策即 allocate、may_append 和 "
       "preempt 返回的记录。调度器不再把决策记进日志；它决定了什么，就返回什么")


def check_scheduled(args: tuple[Any, ...], result: Any) -> str | None:
    """What is wrong with a scheduler method's result, which must be ``(scheduled sequences, decision records)``
    (None: nothing); ``schedule_decode``'s check too."""
    if (not isinstance(result, (tuple, list)) or len(result) != 2 or not isinstance(result[0], list)
            or not all(isinstance(seq, Sequence) for seq in result[0])
            or not isinstance(result[1], list) or not all(isinstance(d, Decision) for d in result[1])):
        return say(NOT_SCHEDULED_AND_DECISIONS, type=type(result).__name__, value=reprlib.repr(result))
    return None


TITLE = Text(en='Admitting prompts: the token budget, chunking and the prefix cache',
             zh='接纳 prompt：token 预算、分块与前缀缓存')
# Hints from the gentlest to the strongest; none of them is the code.
HINTS = (
    Text(en=("Three limits stop admission: the sequence cap, the step's token budget, and free blocks "
             '(can_allocate). Which tokens of a sequence does this step compute, once its cached '
             'blocks are counted?'),
         zh=('有三个限制会停止接纳：序列数上限、这一步的 token 预算、空闲块（can_allocate）。'
             '算上已缓存的块之后，一个序列在这一步要计算哪些 token？')),
    Text(en=('Loop while waiting is not empty and fewer than max_seqs are scheduled. A sequence with '
             'blocks computes num_tokens - num_cached_tokens; a new one first asks can_allocate (-1: '
             'stop) and computes num_tokens - cached_blocks * block_size. A later sequence that does '
             'not fit stops the loop; the first computes min(needed, remaining). allocate (keep the '
             'record it returns), set num_scheduled_tokens; if its prompt is then complete, it is '
             'RUNNING: popleft it and append it to running. Return (scheduled, allocations).'),
         zh=('当 waiting 不为空且已调度的序列少于 max_seqs 时循环。已经持有块的序列计算 num_tokens - '
             'num_cached_tokens；新的序列先问 can_allocate（-1：停止），再计算 num_tokens - '
             'cached_blocks * block_size。后面放不下的序列会结束循环；第一个序列计算 min(需要的, '
             '剩余的)。调用 allocate（留下它返回的记录），设置 num_scheduled_tokens；如果它的 prompt '
             '就此算完，它就是 RUNNING：从 waiting 队首 popleft，追加到 running。最后返回 '
             '(scheduled, allocations)。')),
)


EXERCISE = EngineExercise(
    "schedule_prefill", TITLE,
    "Scheduler.schedule_prefill", ("schedule_prefill",),
    HINTS,
    (Piece("schedule_prefill", "nanovllm_teach.engine.scheduler:Scheduler.schedule_prefill", check_scheduled,
           state=StateWire("scheduler")),),
    (SMALL_BUDGET, CACHED_UNDER_BUDGET, SHARED_PREFIXES, TIGHT_CACHE))
