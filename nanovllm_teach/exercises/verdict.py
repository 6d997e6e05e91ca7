"""The verdict on one graded run, computed in the parent from the child's trace and outcome record only.

Role: grading. Emits no events.

The first decision where the run parts from the reference is said in plain words, with the sequence behind
it as it was then (``seq_context``): the values, never the reference's formula, so that the learner works out
why. A failed run (the function raised, returned something unusable, ran out of time) whose decisions matched
up to the failure has the failure as its first difference. The child reports failures as data; the sentences
are said here, in the parent's language. ``stats`` and ``state_before`` serve the exercises that word a
difference in an event of their own (``EngineExercise.context``).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Mapping

from nanovllm_teach.exercises.base import Exercise, GradeResult, not_implemented
from nanovllm_teach.exercises.references import GradedWorkload
from nanovllm_teach.exercises.worker import Failure
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.trace.diff import VOLATILE, Divergence, describe_event, diff_decisions
from nanovllm_teach.trace.reader import Trace, load_trace
from nanovllm_teach.trace.schema import TraceEvent
from nanovllm_teach.trace.state import EngineState, read_settings, walk

SEQ_HAD = Text(en="at the start of step {step}, seq {seq} had the K/V of {tokens} tokens cached in {count} blocks "
                  "of {size} ({blocks})",
               zh="在第 {step} 步开始时，序列 {seq} 已有 {tokens} 个 token 的 K/V 缓存在 {count} 个块中，每块 {size} 个 "
                  "token（{blocks}）")


def stats(event: TraceEvent | None) -> Mapping[str, Any]:
    """An event's numbers (its payload reads as a mapping), or none for no event."""
    return {} if event is None else event.stats


def state_before(reference: Trace, event_i: int, step: int | None) -> tuple[EngineState, list[int]]:
    """The reference's state at the start of ``step`` (None: just before its event number ``event_i``), and
    the seq ids of the last batch scheduled before that event."""
    settings = read_settings(reference.header, reference.events)
    state = EngineState(settings.block_size, settings.enable_prefix_caching)
    batch: list[int] = []
    for event, now in walk((e for e in reference.events if e.i < event_i), settings):
        if event.event in ("SCHEDULE_DECODE", "SCHEDULE_PREFILL"):
            batch = list(stats(event).get("seq_ids") or [])
        if step is None or event.step is None or event.step < step:
            state = now
    return state, batch


def seq_context(divergence: Divergence, reference: Trace) -> str | None:
    """The sentence on the sequence behind ``divergence`` (None when there is no sequence to speak of)."""
    if divergence.index is None or divergence.reference is None:
        return None
    state, _ = state_before(reference, divergence.reference.i, divergence.reference.step)
    seq = stats(divergence.reference).get("seq_id")
    if seq is None and divergence.yours is not None:
        seq = stats(divergence.yours).get("seq_id")
    if not isinstance(seq, int) or seq not in state.tables:
        return None
    blocks = state.tables[seq]
    return say(SEQ_HAD, step=divergence.reference.step, seq=seq, tokens=state.computed.get(seq, 0),
               count=len(blocks), size=state.block_size, blocks=blocks)


def load_run(path: Path) -> Trace | None:
    """The child's trace of one run up to the failure, if any; None if the run left no readable trace."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a run stopped mid-line: its valid part is what it did
            trace = load_trace(path, strict=False)
    except (OSError, ValueError):
        return None
    # After an exception generate() aborts every request it holds: that clean-up is no decision of the student's.
    cut = next((k for k, e in enumerate(trace.events)
                if e.event == "REQUEST_ABORT" or e.reason in ("aborted", "step_rolled_back")), len(trace.events))
    return Trace(trace.header, trace.events[:cut])


# Where the run stopped, read off its trace.
WHILE_STARTING = Text(en="while the engine was starting", zh="引擎启动时")
BEFORE_FIRST_STEP = Text(en="before the first step", zh="第一步之前")
IN_STEP = Text(en="in step {step}", zh="在第 {step} 步")

# What went wrong, from the child's description of the failure.
RUN_TOO_LONG = Text(en="{where}, the grading run did not finish within {limit:g} s (the reference takes a few "
                       "seconds): it was stopped",
                    zh="{where}，评分运行没有在 {limit:g} 秒内结束（参考实现只需几秒）：已被停止")
CALL_TOO_LONG = Text(en="{where}, your {function} did not return within {limit:g} s: the grader stopped it",
                     zh="{where}，你的 {function} 在 {limit:g} 秒内没有返回：评分器已将它停止")
ENDED_DURING = Text(en="{where}, the grading process ended while your {function} ran (exit code {code}) before "
                       "the run finished: does your code end the process?",
                    zh="{where}，评分进程在你的 {function} 运行时结束了（退出码 {code}），运行没能完成：你的代码"
                       "是否结束了这个进程？")
ENDED = Text(en="{where}, the grading process ended (exit code {code}) before the run finished: does your code "
                "end the process?",
             zh="{where}，评分进程在运行完成之前就结束了（退出码 {code}）：你的代码是否结束了这个进程？")
REFUSED_RESULT = Text(en="{where}, your {function} {problem}", zh="{where}，你的 {function} {problem}")
RAISED = Text(en="{where}, your {function} raised {type}: {message}{line}",
              zh="{where}，你的 {function} 抛出了 {type}：{message}{line}")
AT_LINE = Text(en=" ({file}, line {line}: {code})", zh="（{file} 第 {line} 行：{code}）")
AT_LINE_NO_CODE = Text(en=" ({file}, line {line})", zh="（{file} 第 {line} 行）")
ENGINE_FAILED = Text(en="{where}, the engine failed on what your code gave it: {type}: {message}",
                     zh="{where}，引擎处理你的代码给出的结果时出错：{type}：{message}")
NO_TRACE = Text(en="{where}, the run left no trace to read", zh="{where}，这次运行没有留下可读的 trace")

# The verdict around it: which workload, where the decisions part ways.
CONTEXT = Text(en="workload {name!r} ({description}):\n  {sentence}", zh="工作负载 {name!r}（{description}）：\n  {sentence}")
FIRST_DIFFERENCE = Text(en="your run's decisions first differ from the reference's {place} ({event}):\n  {message}",
                        zh="你的运行所做的决策最早在{place}与参考实现不同（{event}）：\n  {message}")
PLACE_STEP = Text(en="in step {step}", zh="第 {step} 步")  # the place of a divergence in a step; else its ``where``
WENT_ON = Text(en="\n  (there the reference went on: it {did}, {event})",
               zh="\n  （参考实现在这里继续运行：它{did}，{event}）")
LATER = Text(en="\n  (later, {sentence})", zh="\n  （之后，{sentence}）")
SEQ_CONTEXT = Text(en="\n  there, {context}", zh="\n  当时，{context}")


def where_it_stopped(trace: Trace | None) -> str:
    """"while the engine was starting", "before the first step" or "in step N", read off the trace."""
    names = {e.event for e in trace.events} if trace is not None else set()
    if "ENGINE_READY" not in names:
        return say(WHILE_STARTING)
    if "GENERATE_START" not in names:
        return say(BEFORE_FIRST_STEP)
    return say(IN_STEP, step=len(trace.events_named("STEP_DONE")) + 1)


def _code_line(at: tuple[str, int, str] | None) -> str:
    """" (your_file.py, line 12: running.popleft())": the last line of the student's code that ran."""
    if not at:
        return ""
    file, line, code = at
    return say(AT_LINE, file=file, line=line, code=code) if code else say(AT_LINE_NO_CODE, file=file, line=line)


def failure_sentence(failure: Failure | None, where: str) -> str:
    """What went wrong, from the child's record of the failure (None: the run left no trace and said nothing)."""
    if failure is None:
        return say(NO_TRACE, where=where)
    function = failure.function
    if failure.timeout is not None:
        if not function:
            return say(RUN_TOO_LONG, where=where, limit=failure.timeout)
        return say(CALL_TOO_LONG, where=where, function=function, limit=failure.timeout)
    if failure.exitcode is not None:
        if function:
            return say(ENDED_DURING, where=where, function=function, code=failure.exitcode)
        return say(ENDED, where=where, code=failure.exitcode)
    if failure.refused:
        return say(REFUSED_RESULT, where=where, function=function, problem=failure.message)
    if function:
        return say(RAISED, where=where, function=function, type=failure.type, message=failure.message,
                   line=_code_line(failure.at))
    return say(ENGINE_FAILED, where=where, type=failure.type, message=failure.message)


def in_context(workload: GradedWorkload, sentence: str) -> str:
    """``sentence`` under the name and description of the workload it is about."""
    return say(CONTEXT, name=workload.name, description=say(workload.description), sentence=sentence)


def judge(exercise: Exercise, decisions: tuple[str, ...], workload: GradedWorkload, run: Trace | None,
          failure: Failure | None, reference: Trace) -> GradeResult | None:
    """A failing verdict if the run's ``decisions`` events differ from the reference's, or it failed; else None."""
    if failure is not None and failure.not_implemented:
        return not_implemented(exercise, failure.function)
    if run is None:
        return exercise.fail(in_context(workload, failure_sentence(failure, where_it_stopped(None))), workload.name)
    divergence = diff_decisions(run, reference, decisions, ignore=VOLATILE)
    if failure is not None and (divergence is None or divergence.yours is None):
        # The run matched the reference right up to the failure: the failure is the first difference.
        message = in_context(workload, failure_sentence(failure, where_it_stopped(run)))
        if divergence is not None and divergence.reference is not None:
            ref = divergence.reference
            message += say(WENT_ON, did=describe_event(ref), event=ref.event)
        return exercise.fail(message, workload.name, divergence)
    if divergence is None:
        return None
    place = say(PLACE_STEP, step=divergence.step) if divergence.step is not None else divergence.where
    message = in_context(workload, say(FIRST_DIFFERENCE, place=place, event=divergence.event,
                                       message=divergence.message))
    own = getattr(exercise, "context", None)
    context = (own(divergence, reference) if own is not None else None) or seq_context(divergence, reference)
    if context is not None:
        message += say(SEQ_CONTEXT, context=context)
    if failure is not None:
        message += say(LATER, sentence=failure_sentence(failure, where_it_stopped(run)))
    return exercise.fail(message, workload.name, divergence)
