"""Exercise ``postprocess``: taking in the sampled tokens: caching, appending, finishing.

Beside this definition: ``template.py`` to start from, ``solution.py`` the reference.
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.exercises.engine_grading import EngineExercise
from nanovllm_teach.exercises.pieces import Piece, not_sequences
from nanovllm_teach.exercises.workloads import FINISH_REASONS, MODEL_LEN, SMALL_BUDGET, TIGHT_CACHE


def _check_postprocessed(args: tuple[Any, ...], result: Any) -> str | None:
    _scheduler, batch, _token_ids = args
    problem = not_sequences(result)
    if problem is None and [seq.seq_id for seq in result] != batch.seq_ids:
        return (f"returned the sequences {[seq.seq_id for seq in result]}: it must return the batch's sequences "
                f"{batch.seq_ids}, in the batch's order")
    return problem


EXERCISE = EngineExercise(
    "postprocess", "Taking in the sampled tokens: caching, appending, finishing", "Scheduler.postprocess",
    ("postprocess",),
    ("Which sequences of the batch get a token this step, and which only finished a part of their prompt? "
     "The order of the finish checks matters: what does ignore_eos change?",
     "hash_blocks(seq) first; then num_cached_tokens += num_scheduled_tokens and num_scheduled_tokens = 0. "
     "Skip the rest while num_cached_tokens < num_tokens. Append the token; the reason is eos (not "
     "ignore_eos and token == scheduler.eos), else length (num_completion_tokens == max_tokens), else "
     "max_model_len (num_tokens >= scheduler.max_model_len). A finished one goes to scheduler.finish(seq, "
     "reason)."),
    (Piece("postprocess", "nanovllm_teach.engine.scheduler:Scheduler.postprocess", _check_postprocessed),),
    (FINISH_REASONS, MODEL_LEN, SMALL_BUDGET, TIGHT_CACHE))

