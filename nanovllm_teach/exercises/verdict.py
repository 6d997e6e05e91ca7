"""The verdict on one graded run, computed in the parent from the child's trace and outcome record only.

A run's decisions (the exercise's ``decisions`` events) either match the reference's one for one, or the
first difference is said in plain words (what you did, what the reference did, at which step) — the values,
never the reference's formula. A
run that failed (the student's function raised, returned something unusable, did not return in time, or
the engine tripped over what it returned) is judged the same way: if everything matched up to the
failure, the failure is the first difference.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from nanovllm_teach.exercises.base import Exercise, GradeResult, not_implemented
from nanovllm_teach.runs import Workload
from nanovllm_teach.trace.diff import VOLATILE, describe_event, diff_decisions
from nanovllm_teach.trace.reader import Trace, load_trace

if TYPE_CHECKING:
    from nanovllm_teach.exercises.engine_grading import EngineExercise


def _is_cleanup(event_name: str, reason: str) -> bool:
    """Events of the engine tidying up after an exception (generate() aborts every request it holds)."""
    return event_name == "REQUEST_ABORT" or reason in ("aborted", "step_rolled_back")


def load_run(path: Path) -> Trace | None:
    """The child's trace of one run up to the failure, if any (the clean-up after it is no decision of the
    student's); None if the run left no readable trace."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a run stopped mid-line: its valid part is what it did
            trace = load_trace(path, strict=False)
    except (OSError, ValueError):
        return None
    cut = next((k for k, e in enumerate(trace.events) if _is_cleanup(e.event, e.reason)), len(trace.events))
    return Trace(trace.header, trace.events[:cut])


def where_it_stopped(trace: Trace | None) -> str:
    """"while the engine was starting", "before the first step" or "in step N", read off the trace."""
    names = {e.event for e in trace.events} if trace is not None else set()
    if "ENGINE_READY" not in names:
        return "while the engine was starting"
    if "GENERATE_START" not in names:
        return "before the first step"
    return f"in step {len(trace.events_named('STEP_DONE')) + 1}"


def failure_sentence(failure: dict[str, Any], where: str) -> str:
    """What went wrong, from the child's description of the failure (see ``pieces.describe_failure`` and
    ``engine_grading``)."""
    function = failure.get("function")
    if failure.get("timeout") is not None:
        if not function:
            return (f"{where}, the grading run did not finish within {failure['timeout']:g} s "
                    f"(the reference takes a few seconds): it was stopped")
        return f"{where}, your {function} did not return within {failure['timeout']:g} s: the grader stopped it"
    if failure.get("exitcode") is not None:
        during = f" while your {function} ran" if function else ""
        return (f"{where}, the grading process ended{during} (exit code {failure['exitcode']}) before the run "
                f"finished: does your code end the process?")
    if failure.get("refused"):
        return f"{where}, your {function} {failure['message']}"
    if function:
        return f"{where}, your {function} raised {failure['type']}: {failure['message']}{failure['line']}"
    return f"{where}, the engine failed on what your code gave it: {failure['type']}: {failure['message']}"


def judge(exercise: EngineExercise, workload: Workload, run: Trace | None, failure: dict[str, Any] | None,
          reference: Trace) -> GradeResult | None:
    """A failing verdict for a run that differs from the reference, else None."""
    if failure is not None and failure.get("not_implemented"):
        return not_implemented(exercise, failure["function"])
    context = f"workload {workload.name!r} ({workload.description})"
    if run is None:
        sentence = failure_sentence(failure or {"type": "no trace", "message": "", "function": None},
                                    where_it_stopped(None))
        return exercise.fail(f"{context}:\n  {sentence}", workload.name)
    divergence = diff_decisions(run, reference, exercise.decisions, ignore=VOLATILE)
    if failure is not None and (divergence is None or divergence.yours is None):
        # The run matched the reference right up to the failure: the failure is the first difference.
        message = f"{context}:\n  {failure_sentence(failure, where_it_stopped(run))}"
        if divergence is not None and divergence.reference is not None:
            ref = divergence.reference
            message += f"\n  (there the reference went on: it {describe_event(ref)}, {ref.event})"
        return exercise.fail(message, workload.name, divergence)
    if divergence is None:
        return None
    place = f"in {divergence.where}" if divergence.step is not None else divergence.where
    message = (f"{context}:\n  your run's decisions first differ from the reference's {place} "
               f"({divergence.event}):\n  {divergence.message}")
    if failure is not None:
        message += f"\n  (later, {failure_sentence(failure, where_it_stopped(run))})"
    return exercise.fail(message, workload.name, divergence)
