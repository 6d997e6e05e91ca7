"""``build check``'s checks by decisions (chapters 8 and 9): the learner's piece inside the engine, on workloads
chosen so that what the chapter is about happens, the run's TEACHING decisions against the engine's own.

Role: teaching (the track). Emits no events (the engine it runs emits its own).

The resources layer returns its decisions as records and the engine says each one as a TEACHING event
(``BLOCK_ALLOCATE``, ``PREFIX_CACHE_HIT``, ``PREEMPT``, ``SCHEDULE_PREFILL``, ...): a learner's block manager
or scheduler that decides as the engine's does gives the same events in the same order. Each seam is
checked alone, the rest of the engine being the engine's, on the grader's own workloads
(``exercises/workloads.py``: token-id prompts, greedy, ``ignore_eos``, so that when things happen does not
depend on what the model writes). The first decision that differs is found and said the way the exercises
say it (``trace.diff.diff_decisions``, ``exercises.verdict``, ``exercises.feedback``): which workload, which
step, what each side did, and the sequence concerned as it was at the start of that step. The block hash is
also compared value for value, since a consistent but different hash would decide alike.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from nanovllm_teach.engine.block_manager import NO_HASH
from nanovllm_teach.exercises.feedback import seq_context
from nanovllm_teach.exercises.verdict import FIRST_DIFFERENCE, PLACE_STEP, SEQ_CONTEXT, in_context
from nanovllm_teach.exercises.workloads import (LATE_ARRIVALS, MAX_STEPS, PREFIX_REUSE, SHARED_PREFIXES,
                                                SMALL_BUDGET, TIGHT_CACHE)
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.runs import Workload, record_run
from nanovllm_teach.trace import Trace, TraceRecorder
from nanovllm_teach.trace.diff import DECISION_EVENTS, VOLATILE, diff_decisions
from nanovllm_teach.track.chapters_engine import ENGINE_CHAPTERS
from nanovllm_teach.track.compare import called
from nanovllm_teach.track.extract import reference
from nanovllm_teach.track.learner import Piece, installed
from nanovllm_teach.track.seams import Seam

# The workloads of each chapter's seams, by the engine module they come from: a shared prefix and blocks
# found again after their holders finished (the block manager); prompts longer than the token budget and a
# KV cache too small for everyone (the scheduler).
WORKLOADS: dict[str, tuple[Workload, ...]] = {
    "nanovllm_teach.engine.block_manager": (SHARED_PREFIXES, PREFIX_REUSE, TIGHT_CACHE),
    "nanovllm_teach.engine.scheduler": (SMALL_BUDGET, TIGHT_CACHE, LATE_ARRIVALS),
}
HASH_CASES = ([11, 12, 13, 14], [0, 1, 2, 3, 4, 5, 6, 7], [151_643, 7, 99, 2**31])

IN_THE_ENGINE = Text(en="with your {name} in the engine, {sentence}", zh="换上你的 {name} 后，{sentence}")
RAISED = Text(en="with your {name} in the engine, on workload {workload!r}, the run raised {type}: {message}",
              zh="换上你的 {name} 后，在工作负载 {workload!r} 上运行时抛出了 {type}：{message}")
HASH_CASE = Text(en="tokens {tokens} after the hash {prefix}", zh="跟在哈希 {prefix} 之后的 token {tokens}")
WRONG_HASH = Text(en="your {name} on {case} returned {got!r}; the reference gives {want}",
                  zh="你的 {name} 在{case}上返回了 {got!r}；参考实现给出 {want}")


def run(workload: Workload, pieces: list[Piece]) -> Trace:
    """``workload`` on the engine with ``pieces`` in place of its own functions: the TEACHING trace."""
    recorder = TraceRecorder()
    with installed(pieces):
        record_run(workload, recorder, max_steps=MAX_STEPS)
    return Trace.from_recorder(recorder)


@functools.cache
def reference_run(name: str) -> Trace:
    """The engine's own run of the workload ``name`` (of ``WORKLOADS``)."""
    workload = next(w for ws in WORKLOADS.values() for w in ws if w.name == name)
    return run(workload, [])


def first_decision_difference(run_trace: Trace, workload: Workload) -> str | None:
    """The first decision of ``run_trace`` that differs from the engine's on ``workload``, said as the
    exercises say it, with the sequence behind it at the start of that step (None: every decision agrees)."""
    ref = reference_run(workload.name)
    divergence = diff_decisions(run_trace, ref, DECISION_EVENTS, ignore=VOLATILE)
    if divergence is None:
        return None
    place = say(PLACE_STEP, step=divergence.step) if divergence.step is not None else divergence.where
    message = in_context(workload, say(FIRST_DIFFERENCE, place=place, event=divergence.event,
                                       message=divergence.message))
    context = seq_context(divergence, ref)
    return message + (say(SEQ_CONTEXT, context=context) if context is not None else "")


def check_by_decisions(seam: Seam, fn: Callable[..., Any]) -> str | None:
    """``fn`` inside the engine on each of its chapter's workloads: the first decision that differs, or None."""
    for workload in WORKLOADS[seam.module]:
        try:
            trace = run(workload, [Piece(seam, fn, True)])
        except Exception as error:  # the learner's code, or the engine tripping over what it returned
            return say(RAISED, name=seam.qualname, workload=workload.name, type=type(error).__name__,
                       message=str(error)[:300])
        problem = first_decision_difference(trace, workload)
        if problem:
            return say(IN_THE_ENGINE, name=seam.qualname, sentence=problem)
    return None


def check_block_hash(seam: Seam, fn: Callable[..., Any]) -> str | None:
    """The hash value for value (a first block, then blocks chained on the one before), then the decisions
    it leads to."""
    ref = reference(seam)
    prefix = NO_HASH
    for tokens in HASH_CASES:
        case = say(HASH_CASE, tokens=tokens, prefix=prefix)
        got, want = called(seam.qualname, case, fn, (list(tokens), prefix)), ref(list(tokens), prefix)
        if got != want:
            return say(WRONG_HASH, name=seam.qualname, case=case, got=got, want=want)
        prefix = want
    return check_by_decisions(seam, fn)


DECISION_CHECKS: dict[str, Callable[[Seam, Callable[..., Any]], str | None]] = {
    **{seam.qualname: check_by_decisions for chapter in ENGINE_CHAPTERS for seam in chapter.seams
       if seam.module in WORKLOADS},
    "compute_block_hash": check_block_hash,
}
