"""The two exercises that rebuild the rest of a scheduler step: admitting prompts (``schedule_prefill``) and
taking in the sampled tokens (``postprocess``).

Graded like every engine exercise (``engine_grading``): the student's function replaces the scheduler's
method, the workloads run, and the trace must match the reference engine's event for event. The workloads
(``workloads.py``) are built so that each rule decides something: a token budget smaller than the prompts (chunking, and a
second prompt that must wait), shared prefixes under a small budget (cached tokens are not computed), a
full cache (admission stops), and for ``postprocess`` every finish reason — EOS, ``max_tokens``,
``max_model_len`` — and an ``ignore_eos`` request that samples EOS and goes on.
"""

from __future__ import annotations

from typing import Any

from nanovllm_teach.engine.sequence import Sequence
from nanovllm_teach.exercises.engine_grading import EngineExercise
from nanovllm_teach.exercises.pieces import Piece
from nanovllm_teach.exercises.workloads import (
    CACHED_UNDER_BUDGET, FINISH_REASONS, MODEL_LEN, SHARED_PREFIXES, SMALL_BUDGET, TIGHT_CACHE,
)


def _check_scheduled(args: tuple[Any, ...], result: Any) -> str | None:
    if not isinstance(result, list) or not all(isinstance(seq, Sequence) for seq in result):
        return f"returned {type(result).__name__} {result!r}: it must return a list of Sequence objects"
    return None


def _check_postprocessed(args: tuple[Any, ...], result: Any) -> str | None:
    _scheduler, batch, _token_ids = args
    problem = _check_scheduled(args, result)
    if problem is None and [seq.seq_id for seq in result] != batch.seq_ids:
        return (f"returned the sequences {[seq.seq_id for seq in result]}: it must return the batch's sequences "
                f"{batch.seq_ids}, in the batch's order")
    return problem


SCHEDULE_PREFILL = EngineExercise(
    "schedule_prefill", "Admitting prompts: the token budget, chunking and the prefix cache",
    "Scheduler._schedule_prefill", ("schedule_prefill",),
    ("Three limits stop admission: the sequence cap, the step's token budget, and free blocks "
     "(can_allocate). Which tokens of a sequence does this step compute, once its cached blocks are counted?",
     "Loop while waiting is not empty and fewer than max_seqs are scheduled. A sequence with blocks computes "
     "num_tokens - num_cached_tokens; a new one first asks can_allocate (-1: stop) and computes num_tokens - "
     "cached_blocks * block_size. A later sequence that does not fit stops the loop; the first computes "
     "min(needed, remaining). allocate, set num_scheduled_tokens; if its prompt is then complete, popleft it, "
     "_transition it to RUNNING and append it to running."),
    (Piece("schedule_prefill", "schedule_prefill", _check_scheduled),),
    (SMALL_BUDGET, CACHED_UNDER_BUDGET, SHARED_PREFIXES, TIGHT_CACHE))

POSTPROCESS = EngineExercise(
    "postprocess", "Taking in the sampled tokens: caching, appending, finishing", "Scheduler.postprocess",
    ("postprocess",),
    ("Which sequences of the batch get a token this step, and which only finished a part of their prompt? "
     "The order of the finish checks matters: what does ignore_eos change?",
     "hash_blocks(seq) first; then num_cached_tokens += num_scheduled_tokens and num_scheduled_tokens = 0. "
     "Skip the rest while num_cached_tokens < num_tokens. Append the token; the reason is eos (not "
     "ignore_eos and token == scheduler.eos), else length (num_completion_tokens == max_tokens), else "
     "max_model_len (num_tokens >= scheduler.max_model_len). A finished one: set finish_reason, leave "
     "accepted and running, _transition to FINISHED (token_id=..., finish_reason=...), then deallocate."),
    (Piece("postprocess", "postprocess", _check_postprocessed),),
    (FINISH_REASONS, MODEL_LEN, SMALL_BUDGET, TIGHT_CACHE))
