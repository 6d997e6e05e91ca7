"""``build check``'s checks by decisions (chapters 8 to 10): the learner's piece inside the engine, on workloads
chosen so that what the chapter is about happens, the run's TEACHING decisions against the engine's own.

Role: teaching (the track). Emits no events (the engine it runs emits its own).

The resources layer returns its decisions as records and the engine says each one as a TEACHING event
(``BLOCK_ALLOCATE``, ``PREFIX_CACHE_HIT``, ``PREEMPT``, ``SCHEDULE_PREFILL``, ...): a learner's block manager
or scheduler that decides as the engine's does gives the same events in the same order. Each seam is
checked alone, the rest of the engine being the engine's, on the grader's own workloads
(``step_workloads``: token-id prompts, greedy, ``ignore_eos``, so that when things happen does not
depend on what the model writes). The first decision that differs is found and said the way the exercises
say it (``trace.diff.diff_decisions``, ``exercises.verdict``): which workload, which
step, what each side did, and the sequence concerned as it was at the start of that step. The block hash is
also compared value for value, since a consistent but different hash would decide alike.

Chapter 10's pieces (the model runner's inputs, the engine loop) run in nano-vllm's own engine, a plain
``LLMEngine`` driven by its ``generate`` (``LLM`` is that engine inside the serving shell, whose loop is the
shell's); the tensors the runner was given (``PREPARE_PREFILL_TENSORS``, ``PREPARE_DECODE_TENSORS``, every
value recorded) are compared as decisions too, and then every request's tokens.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from typing import Any, Callable

from nanovllm_teach.engine.block_manager import NO_HASH
from nanovllm_teach.exercises.verdict import FIRST_DIFFERENCE, PLACE_STEP, SEQ_CONTEXT, in_context, seq_context
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.runs import Workload, record_run
from nanovllm_teach.step_workloads import (CACHED_UNDER_BUDGET, LATE_ARRIVALS, MAX_STEPS, PREFIX_REUSE, SHARED_PREFIXES,
                                         SMALL_BUDGET, TIGHT_CACHE)
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
    "nanovllm_teach.engine.model_runner": (CACHED_UNDER_BUDGET, TIGHT_CACHE),
    "nanovllm_teach.engine.llm_engine": (CACHED_UNDER_BUDGET, TIGHT_CACHE),
}
LOOP_MODULES = ("nanovllm_teach.engine.model_runner", "nanovllm_teach.engine.llm_engine")
LOOP_EVENTS = ("PREPARE_PREFILL_TENSORS", "PREPARE_DECODE_TENSORS") + DECISION_EVENTS
HASH_CASES = ([11, 12, 13, 14], [0, 1, 2, 3, 4, 5, 6, 7], [151_643, 7, 99, 2**31])

IN_THE_ENGINE = Text(en="with your {name} in the engine, {sentence}", zh="换上你的 {name} 后，{sentence}")
RAISED = Text(en="with your {name} in the engine, on workload {workload!r}, the run raised {type}: {message}",
              zh="换上你的 {name} 后，在工作负载 {workload!r} 上运行时抛出了 {type}：{message}")
OTHER_TOKENS = Text(en="with your {name} in the engine, workload {workload!r}: every decision agrees, but request "
                       "{seq} generated {got} where the engine generated {want} (token {index} first differs)",
                   zh="换上你的 {name} 后，工作负载 {workload!r}：每个决策都一致，但请求 {seq} 生成了 {got}，而引擎生成的是 "
                      "{want}（第 {index} 个 token 起不同）")
OTHER_COUNT = Text(en="with your {name} in the engine, workload {workload!r}: every decision agrees, but it returned "
                      "{got} sequences for {want} prompts",
                   zh="换上你的 {name} 后，工作负载 {workload!r}：每个决策都一致，但它为 {want} 个 prompt 返回了 {got} 条序列")
HASH_CASE = Text(en="tokens {tokens} after the hash {prefix}", zh="跟在哈希 {prefix} 之后的 token {tokens}")
WRONG_HASH = Text(en="your {name} on {case} returned {got!r}; the reference gives {want}",
                  zh="你的 {name} 在{case}上返回了 {got!r}；参考实现给出 {want}")


def plain(workload: Workload) -> Workload:
    """``workload`` on the plain PyTorch attention and the eager step (as ``learner.generate`` runs): every step
    goes through the layers, and no C++ kernel is built in the sandbox, where the check runs (its decisions do
    not depend on the backend)."""
    return dataclasses.replace(workload, settings={**workload.settings, "attention_backend": "torch",
                                                   "enforce_eager": True})


def run(workload: Workload, pieces: list[Piece]) -> Trace:
    """``workload`` on the engine with ``pieces`` in place of its own functions: the TEACHING trace."""
    recorder = TraceRecorder()
    with installed(pieces):
        record_run(plain(workload), recorder, max_steps=MAX_STEPS)
    return Trace.from_recorder(recorder)


@functools.cache
def reference_run(name: str) -> Trace:
    """The engine's own run of the workload ``name`` (of ``WORKLOADS``)."""
    workload = next(w for ws in WORKLOADS.values() for w in ws if w.name == name)
    return run(workload, [])


def run_loop(workload: Workload, pieces: list[Piece]) -> tuple[Trace, list[list[int]]]:
    """``workload``'s prompts through nano-vllm's engine (``LLMEngine.generate``, no arrivals) with ``pieces``
    in place of its own functions: the trace, every tensor value in it, and each request's tokens."""
    from nanovllm_teach import default_model_path
    from nanovllm_teach.engine.llm_engine import LLMEngine
    from nanovllm_teach.llm import real_parts
    from nanovllm_teach.settings import Settings

    recorder = TraceRecorder(detail_decode_steps=sys.maxsize, detail_max_elements=sys.maxsize)
    with installed(pieces):
        parts = real_parts(str(default_model_path()), Settings.from_kwargs(dict(plain(workload).settings)))
        engine = LLMEngine(parts.config, recorder=recorder, make_runner=parts.make_runner, clock=parts.clock,
                           trace_header=parts.config.trace_header({"workload": workload.name}, None),
                           tokenizer=parts.tokenizer, eos_token_id=parts.eos_token_id)
        try:
            seqs = engine.generate(workload.prompts_for(parts.tokenizer), list(workload.params), use_tqdm=False)
        finally:
            engine.close()
    return Trace.from_recorder(recorder), [list(seq.completion_token_ids) for seq in seqs]


@functools.cache
def reference_loop(name: str) -> tuple[Trace, list[list[int]]]:
    """The engine's own ``run_loop`` of the workload ``name``."""
    workload = next(w for ws in WORKLOADS.values() for w in ws if w.name == name)
    return run_loop(workload, [])


def first_decision_difference(run_trace: Trace, ref: Trace, workload: Workload,
                              events: tuple[str, ...] = DECISION_EVENTS) -> str | None:
    """The first of ``events`` in ``run_trace`` that differs from the engine's run ``ref`` of ``workload``, said
    as the exercises say it, with the sequence behind it at the start of that step (None: all agree)."""
    divergence = diff_decisions(run_trace, ref, events, ignore=VOLATILE)
    if divergence is None:
        return None
    place = say(PLACE_STEP, step=divergence.step) if divergence.step is not None else divergence.where
    message = in_context(workload, say(FIRST_DIFFERENCE, place=place, event=divergence.event,
                                       message=divergence.message))
    context = seq_context(divergence, ref)
    return message + (say(SEQ_CONTEXT, context=context) if context is not None else "")


def _difference(seam: Seam, fn: Callable[..., Any], workload: Workload) -> str | None:
    """What ``fn`` changes in the engine's run of ``workload``: the first decision that differs (for the
    loop's pieces, then the first request whose tokens differ), or None."""
    pieces = [Piece(seam, fn, True)]
    if seam.module not in LOOP_MODULES:
        ref = reference_run(workload.name)
        problem = first_decision_difference(run(workload, pieces), ref, workload)
        return say(IN_THE_ENGINE, name=seam.qualname, sentence=problem) if problem else None
    ref, want = reference_loop(workload.name)
    trace, tokens = run_loop(workload, pieces)
    problem = first_decision_difference(trace, ref, workload, LOOP_EVENTS)
    if problem:
        return say(IN_THE_ENGINE, name=seam.qualname, sentence=problem)
    if len(tokens) != len(want):
        return say(OTHER_COUNT, name=seam.qualname, workload=workload.name, got=len(tokens), want=len(want))
    for seq, (got, expected) in enumerate(zip(tokens, want)):
        if got != expected:
            index = next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))
            return say(OTHER_TOKENS, name=seam.qualname, workload=workload.name, seq=seq, got=got, want=expected,
                       index=index)
    return None


def check_by_decisions(seam: Seam, fn: Callable[..., Any]) -> str | None:
    """``fn`` inside the engine on each of its chapter's workloads: the first difference, or None."""
    for workload in WORKLOADS[seam.module]:
        (reference_loop if seam.module in LOOP_MODULES else reference_run)(workload.name)  # the engine's, first
        try:
            problem = _difference(seam, fn, workload)
        except Exception as error:  # the learner's code, or the engine tripping over what it returned
            return say(RAISED, name=seam.qualname, workload=workload.name, type=type(error).__name__,
                       message=str(error)[:300])
        if problem:
            return problem
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
