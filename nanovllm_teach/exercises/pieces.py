"""Plugging a student's functions into the engine, in the grading child process only.

Role: grading. Emits no events.

A ``Piece`` names a student function and the engine's exercise point it replaces, ``"module:attribute"``
(``tests/test_exercises.py`` checks that every point still exists with the same arguments). ``installed()``
puts guarded proxies in place for one run. The guard turns whatever the function raises (``SystemExit``
included) into a ``StudentError``, so the verdict blames the right function; checks the result before the
engine uses it (a float slot is stopped with a sentence, not a crash deep inside torch); and tells the watch
which function runs, so a call that never returns is named.
"""

from __future__ import annotations

import pkgutil
import reprlib
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol
from unittest import mock

from nanovllm_teach.engine.decisions import Decision
from nanovllm_teach.engine.sequence import Sequence
from nanovllm_teach.exercises.base import Solution
from nanovllm_teach.exercises.remote import RemoteFailure
from nanovllm_teach.exercises.snapshots import StateWire
from nanovllm_teach.exercises.worker import Failure
from nanovllm_teach.i18n import Text, say


class Watch(Protocol):
    """Where the child tells the parent which student function is running (``remote.SharedWatch``)."""

    def enter(self, function: str) -> str: ...

    def leave(self, previous: str) -> None: ...


@dataclass(frozen=True)
class Piece:
    """One function a student writes, and the exercise point it replaces; ``check`` sees its arguments and
    result before the engine uses the result, and says what is wrong (None: nothing)."""

    function: str
    point: str  # "module:attribute"
    check: Callable[[tuple[Any, ...], Any], str | None] | None = None
    # The types of the function's arguments (a builtin's name, ``"list[T]"``, ``"T|None"``, or ``"module:Type"``,
    # an exercise's own records kept in its folder: ``worker.resolve_wire_type``), when every one is plain
    # data: then the function runs in the sandboxed worker and the engine calls it across the edge (``remote``).
    wire: tuple[str, ...] | None = None
    # Turns the engine's arguments into the plain data ``wire`` names (None: they are that already).
    encode: Callable[[tuple[Any, ...]], tuple[Any, ...]] | None = None
    # For a method of the scheduler or the block manager: how its object crosses the edge as a snapshot and
    # comes back changed (``snapshots.StateWire``), in place of ``wire``.
    state: StateWire | None = None
    # The engine's other functions that compute this answer, or part of it (the slot formula a decode step and a
    # prefill share): they raise in the worker's copy too, so no second copy answers for the learner.
    same_answer: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.wire is None) == (self.state is None):
            raise ValueError(f"piece {self.function!r} needs exactly one of wire= (plain arguments) and state= "
                             f"(a method of the scheduler or the block manager), to run in the sandbox")


def defined_at(point: str) -> str:
    """Where what stands at ``point`` is defined, as a point: ``"nanovllm_teach.engine.model_runner:
    kv_block_bytes"`` is imported from ``"nanovllm_teach.utils.memory:kv_block_bytes"``, where a learner
    could import it too (``point`` itself if it is defined there, or is no plain function of the package)."""
    found = pkgutil.resolve_name(point)
    module, name = getattr(found, "__module__", ""), getattr(found, "__qualname__", "")
    if not module.startswith("nanovllm_teach.") or "<" in name:
        return point
    return f"{module}:{name}"


# Said after "your <function> " in the verdict (in the child, in the language the parent chose).
# A scheduler method returns its decisions (it keeps no log of them): a function written the way the engine
# used to be (the sequences alone) is told what changed, not left to crash the engine.
NOT_SCHEDULED_AND_DECISIONS = Text(
    en="returned {type} {value}: it returns two things, (the scheduled sequences, the decisions taken on the way): "
       "the records that allocate, may_append and preempt return. The scheduler keeps no log of its decisions any "
       "more; what it decided is what it returns",
    zh="返回了 {type} {value}：它要返回两样东西，(被调度的序列, 途中做出的决策)，决策即 allocate、may_append 和 "
       "preempt 返回的记录。调度器不再把决策记进日志；它决定了什么，就返回什么")


def not_scheduled_and_decisions(result: Any) -> str | None:
    """What is wrong with a result that must be ``(scheduled sequences, decision records)`` (None: nothing)."""
    if (not isinstance(result, (tuple, list)) or len(result) != 2 or not isinstance(result[0], list)
            or not all(isinstance(seq, Sequence) for seq in result[0])
            or not isinstance(result[1], list) or not all(isinstance(d, Decision) for d in result[1])):
        return say(NOT_SCHEDULED_AND_DECISIONS, type=type(result).__name__, value=reprlib.repr(result))
    return None


def is_int(value: Any) -> bool:
    """An int that is not a bool (what a block id, a count or a slot must be)."""
    return isinstance(value, int) and not isinstance(value, bool)


class StudentError(Exception):
    """A student function raised, or returned something the engine cannot use (``refused``)."""

    def __init__(self, function: str, original: BaseException, refused: bool = False) -> None:
        super().__init__(f"{function}: {original}")
        self.function = function
        self.original = original
        self.refused = refused


def _guarded(piece: Piece, fn: Callable[..., Any], watch: Watch) -> Callable[..., Any]:
    """``fn`` (a proxy of the learner's function: ``remote``) as the engine will call it."""
    def call(*args: Any, **kwargs: Any) -> Any:
        previous = watch.enter(piece.function)
        try:
            result = fn(*args, **kwargs)
        except StudentError:
            raise  # from another of the student's functions, which this one called: that one is to blame
        except BaseException as error:  # SystemExit, KeyboardInterrupt...: all of them are the verdict
            raise StudentError(piece.function, error) from error
        finally:
            watch.leave(previous)
        problem = piece.check(args, result) if piece.check is not None else None
        if problem is not None:
            raise StudentError(piece.function, ValueError(problem), refused=True)
        return result

    call.__name__ = piece.function
    return call


@contextmanager
def installed(pieces: tuple[Piece, ...], solution: Solution, watch: Watch) -> Iterator[None]:
    """The student's functions in place of the engine's, for the length of the block."""
    with ExitStack() as stack:
        for piece in pieces:
            stack.enter_context(mock.patch(piece.point.replace(":", "."),
                                           _guarded(piece, solution[piece.function], watch)))
        yield


def describe_failure(error: BaseException) -> Failure:
    """What the parent needs to word the verdict on ``error``, as a record. What the learner's code raised
    comes from the worker (``RemoteFailure``, its line already found there); anything else a guard raised is a
    refused result, or the grader's own failure around the call."""
    if not isinstance(error, StudentError):
        return Failure(None, type(error).__name__, str(error))
    if isinstance(error.original, RemoteFailure):  # said by the worker, checked by ``remote``
        return error.original.failure
    return Failure(error.function, type(error.original).__name__, str(error.original), refused=error.refused)
