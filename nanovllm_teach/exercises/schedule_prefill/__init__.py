"""Exercise ``schedule_prefill``: admitting prompts: the token budget, chunking and the prefix cache.

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference.
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.exercises.engine_grading import EngineExercise, Piece, not_scheduled_and_decisions
from nanovllm_teach.exercises.snapshots import StateWire
from nanovllm_teach.i18n import Text
from nanovllm_teach.step_workloads import CACHED_UNDER_BUDGET, SHARED_PREFIXES, SMALL_BUDGET, TIGHT_CACHE

ORDER = 10  # the course's order (``nanovllm-teach exercises``): the scheduler's step comes first


def _check_scheduled(args: tuple[Any, ...], result: Any) -> str | None:
    return not_scheduled_and_decisions(result)


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
    (Piece("schedule_prefill", "nanovllm_teach.engine.scheduler:Scheduler.schedule_prefill", _check_scheduled,
           state=StateWire("scheduler")),),
    (SMALL_BUDGET, CACHED_UNDER_BUDGET, SHARED_PREFIXES, TIGHT_CACHE))
