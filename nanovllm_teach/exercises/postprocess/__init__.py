"""Exercise ``postprocess``: taking in the sampled tokens: caching, appending, finishing.

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference.
"""

from __future__ import annotations

import reprlib
from typing import Any

from nanovllm_teach.engine.decisions import Decision
from nanovllm_teach.exercises.engine_grading import EngineExercise, Piece
from nanovllm_teach.exercises.postprocess.workloads import FINISH_REASONS, MODEL_LEN
from nanovllm_teach.exercises.snapshots import StateWire
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.step_workloads import SMALL_BUDGET, TIGHT_CACHE

ORDER = 30  # the course's order (``nanovllm-teach exercises``): the end of the scheduler's step


# What the check says, after "your postprocess " / "你的 postprocess " in the verdict.
NOT_DECISIONS = Text(
    en="returned {type} {value}: it returns the decisions it took, a list of records (what finish returns: "
       "Finished, then Freed), not the batch's sequences. The scheduler keeps no log of its decisions any more; "
       "what it decided is what it returns",
    zh="返回了 {type} {value}：它要返回自己做出的决策，即一个由记录组成的 list（finish 返回的 Finished 和 "
       "Freed），而不是这一批的序列。调度器不再把决策记进日志；它决定了什么，就返回什么")
NOT_IN_BATCH = Text(en="returned a decision about seq {seq}, which is not in the batch {batch}",
                    zh="返回了关于序列 {seq} 的决策，但它不在这一批 {batch} 中")


def _check_postprocessed(args: tuple[Any, ...], result: Any) -> str | None:
    _scheduler, batch, _token_ids = args
    if not isinstance(result, list) or not all(isinstance(d, Decision) for d in result):
        return say(NOT_DECISIONS, type=type(result).__name__, value=reprlib.repr(result))
    stranger = next((d.seq_id for d in result if d.seq_id not in batch.seq_ids), None)
    if stranger is not None:
        return say(NOT_IN_BATCH, seq=stranger, batch=batch.seq_ids)
    return None


TITLE = Text(en='Taking in the sampled tokens: caching, appending, finishing',
             zh='接收采样出的 token：缓存、追加、结束')
# Hints from the gentlest to the strongest; none of them is the code.
HINTS = (
    Text(en=('Which sequences of the batch get a token this step, and which only finished a part of '
             'their prompt? The order of the finish checks matters: what does ignore_eos change?'),
         zh=('这一批里哪些序列在这一步得到了一个 token，哪些只是完成了 prompt '
             '的一部分？结束条件的检查顺序很重要：ignore_eos 会改变什么？')),
    Text(en=('hash_blocks(seq) first; then num_cached_tokens += num_scheduled_tokens and '
             'num_scheduled_tokens = 0. Skip the rest while num_cached_tokens < num_tokens. Append '
             'the token; the reason is eos (not ignore_eos and token == scheduler.eos), else length '
             '(num_completion_tokens == max_tokens), else max_model_len (num_tokens >= '
             'scheduler.max_model_len). A finished one goes to scheduler.finish(seq, reason); return '
             'the records every finish returned.'),
         zh=('先调用 hash_blocks(seq)；然后 num_cached_tokens += num_scheduled_tokens，并令 '
             'num_scheduled_tokens = 0。只要 num_cached_tokens < num_tokens 就跳过后面的步骤。追加 '
             'token；结束原因依次是 eos（not ignore_eos 且 token == scheduler.eos），否则 '
             'length（num_completion_tokens == max_tokens），否则 max_model_len（num_tokens >= '
             'scheduler.max_model_len）。已结束的序列交给 scheduler.finish(seq, reason)；最后返回每次 '
             'finish 返回的记录。')),
)


EXERCISE = EngineExercise(
    "postprocess", TITLE, "Scheduler.postprocess",
    ("postprocess",),
    HINTS,
    (Piece("postprocess", "nanovllm_teach.engine.scheduler:Scheduler.postprocess", _check_postprocessed,
           state=StateWire("scheduler", ("batch", "list[int]"))),),
    (FINISH_REASONS, MODEL_LEN, SMALL_BUDGET, TIGHT_CACHE))

