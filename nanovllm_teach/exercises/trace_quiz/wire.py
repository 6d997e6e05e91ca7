"""The quiz's trace across the sandbox's edge, and the learner's answers back.

Role: grading, both sides of the sandbox's edge. Emits no events.

Outside, ``quiz_record(trace)`` turns the quiz trace into plain data (its header and its events, each
payload a dict), which travels to the worker in one bounded frame. Inside (the worker, on the grading copy
of the package) ``answer`` rebuilds the same ``Trace`` from it with the torch-free trace reader (every
payload checked against the event contract again), gives it to the learner's ``answer_quiz`` (or takes
``answer_quiz`` as the answers dict itself), and answers with plain data only: an int stays an int,
anything else is described by its type's name and a shortened repr, never sent as an object.
"""

from __future__ import annotations

from typing import Any

import msgspec

from nanovllm_teach.exercises.worker import is_int
from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.trace.schema import TraceEvent

ADAPTER = "nanovllm_teach.exercises.trace_quiz.wire:answer"
RECORD_TYPE = "nanovllm_teach.exercises.trace_quiz.wire:QuizRecord"


class QuizRecord(msgspec.Struct, frozen=True):
    """A trace as data: the header line and the events, as a trace file holds them."""

    header: dict[str, Any]
    events: list[TraceEvent]


def quiz_record(trace: Trace) -> QuizRecord:
    return QuizRecord(trace.header, trace.events)


def _plain(value: Any) -> Any:
    return value if is_int(value) else {"not_int": type(value).__name__[:80], "repr": repr(value)[:60]}


def answer(given: Any, record: QuizRecord) -> dict[str, Any]:
    """In the worker: ``{"answers": {key: int or description}}``, ``{"not_a_dict": type name}``, or
    ``{"absent": True}`` when the file defines no ``answer_quiz``."""
    if given is None:
        return {"absent": True}
    if callable(given):
        given = given(Trace(record.header, record.events))
    if not isinstance(given, dict):
        return {"not_a_dict": type(given).__name__[:80]}
    return {"answers": {str(key)[:80]: _plain(value) for key, value in given.items()}}
