"""Grading an engine exercise: the student's functions in the real engine, their trace against the reference.

Role: grading. Emits no events (the engine it runs emits its own).

A ``Piece`` names a student function and the exercise point it replaces, ``"module:attribute"``
(``tests/test_exercises.py`` checks that every point still exists with the same arguments). The solution is
screened without running it (``base``), then the reference traces start recording (``references``); the
sandboxed worker loads the student's file; a forked grading child runs every workload with guarded calls
into it in the pieces' places, writing one trace per workload and an outcome record; the parent judges them in order
(``verdict``). PASS needs every workload to match and the child to have ended normally.
"""

from __future__ import annotations

import pkgutil
import tempfile
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator
from unittest import mock

from nanovllm_teach.exercises.base import (DEFAULT_TIME_LIMIT_S, Exercise, GradeResult, SolutionSource,
                                          borrowed_from_solutions, imports_reference_solutions, missing_functions)
from nanovllm_teach.exercises.references import GradedWorkload, PendingReferences, record_graded
from nanovllm_teach.exercises.remote import (ChildEnd, Outcome, RemoteFailure, Worker, read_outcome,
                                            run_in_child, write_outcome)
from nanovllm_teach.exercises.snapshots import StateWire
from nanovllm_teach.exercises.verdict import judge, load_run
from nanovllm_teach.exercises.worker import Failure
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.step_workloads import MAX_STEPS
from nanovllm_teach.trace.diff import DECISION_EVENTS, Divergence
from nanovllm_teach.trace.reader import Trace


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


def _guarded(piece: Piece, worker: Worker) -> Callable[..., Any]:
    """The learner's function as the engine calls it: a call into ``worker`` (a method's object goes as a
    snapshot and comes back changed, ``snapshots.StateWire``). Whatever goes wrong is a ``RemoteFailure`` that
    names the function; its result is checked before the engine uses it (a float slot is stopped with a
    sentence, not a crash deep inside torch)."""
    def call(*args: Any) -> Any:
        try:
            if piece.state is not None:
                result = piece.state.call(worker, piece.function, args)
            else:
                result = worker.call(piece.function, piece.encode(args) if piece.encode else args, piece.wire)
        except RemoteFailure:
            raise  # what the worker said of the learner's code (a time-out included), checked by ``remote``
        except BaseException as error:  # the call's own failure around it, SystemExit included
            raise RemoteFailure(Failure(piece.function, type(error).__name__, str(error))) from error
        problem = piece.check(args, result) if piece.check is not None else None
        if problem is not None:
            raise RemoteFailure(Failure(piece.function, message=problem, refused=True))
        return result

    call.__name__ = piece.function
    return call


@contextmanager
def installed(pieces: tuple[Piece, ...], worker: Worker) -> Iterator[None]:
    """The learner's functions, answered by ``worker``, in place of the engine's for the length of the block."""
    with ExitStack() as stack:
        for piece in pieces:
            stack.enter_context(mock.patch(piece.point.replace(":", "."), _guarded(piece, worker)))
        yield


def describe_failure(error: BaseException) -> Failure:
    """What the parent needs to word the verdict on ``error``: a learner's function's failure as its guard
    recorded it, else the engine's own (no function of the learner's to blame)."""
    return error.failure if isinstance(error, RemoteFailure) else Failure(None, type(error).__name__, str(error))


OUTCOME = "outcome.json"

ENDED_AFTER_THE_RUNS = Text(en="the grading process ended (exit code {code}) after all the runs matched, before it "
                               "finished: does your code end the process?",
                            zh="所有运行都与参考实现一致之后，评分进程没能正常收尾就结束了（退出码 {code}）：你的代码"
                               "是否结束了这个进程？")
ALL_MATCH = Text(en="with your {functions} the engine decides as the reference does on all {count} workloads "
                    "({decisions} decisions)",
                 zh="换上你的 {functions} 后，引擎在全部 {count} 个工作负载上的决策都与参考实现一致（共 {decisions} 个决策）")
AND = Text(en=" and ", zh=" 和 ")


def run_failure(end: ChildEnd, outcome: Outcome, workload: str) -> Failure | None:
    """How the child's run of ``workload`` failed (None: it did not); not in the outcome: the child was stopped
    or ended during it."""
    return outcome.runs[workload] if workload in outcome.runs else end.failure()


def exercise_points(pieces: tuple[Piece, ...]) -> tuple[str, ...]:
    """What raises in the worker's copy of the package: the exercise points, where each is defined, and the
    engine's other functions computing the same answer."""
    return tuple(sorted({p.point for p in pieces} | {defined_at(p.point) for p in pieces}
                        | {point for p in pieces for point in p.same_answer}))


def warm_up() -> None:
    """Import, in this process, what starting the engine imports (torch, transformers and the engine), so
    that a grading child forked from it starts in a fraction of a second instead of seconds. Runs none of
    the engine's code, which a notebook may have patched."""
    import nanovllm_teach.llm  # noqa: F401 (for every child to come)


def screened(solution: SolutionSource, functions: tuple[str, ...]) -> str | None:
    """Why ``solution`` is refused before anything of it runs (None: it is not)."""
    if isinstance(solution, dict):
        return missing_functions(solution, functions) or borrowed_from_solutions(solution)
    return imports_reference_solutions(Path(solution))


def graded_in_worker(exercise: Any, solution: SolutionSource, time_limit: float, isolate: bool | None,
                     judge: Callable[[Worker], GradeResult]) -> GradeResult:
    """``judge``'s verdict on the sandboxed worker that loaded the learner's functions."""
    source = Path(solution) if not isinstance(solution, dict) else solution
    with Worker(source, exercise.functions, exercise_points(exercise.pieces), time_limit, isolate) as worker:
        problem = worker.load()
        result = exercise.fail(problem) if problem else judge(worker)
        result.output = worker.close()
        result.isolated = worker.isolated
    return result


@dataclass(frozen=True)
class EngineExercise(Exercise):
    pieces: tuple[Piece, ...]
    workloads: tuple[GradedWorkload, ...]
    # The events that say what the learner's function decided, compared with the reference's in order: the
    # scheduling and block decisions, and for an execution-layer piece the event its result shows in.
    decisions: tuple[str, ...] = DECISION_EVENTS
    # What the exercise says about a first difference in an event of its own (a slot mapping, a replayed graph),
    # from the divergence and the reference trace; None, or None said: the sequence behind it (``verdict``).
    context: Callable[[Divergence, Trace], str | None] | None = None

    def _run_student(self, worker: Worker, folder: Path, model: str | Path | None) -> None:
        """The grading child's body."""
        outcome = Outcome()
        path = folder / OUTCOME
        for workload in self.workloads:
            failure = None
            try:
                with installed(self.pieces, worker):
                    record_graded(workload, folder / f"{workload.name}.jsonl", model, MAX_STEPS)
            except BaseException as error:  # whatever the student's code raised is the verdict's business
                failure = describe_failure(error)
            outcome.runs[workload.name] = failure
            write_outcome(path, outcome)
            if failure is not None:
                break
        outcome.finished = True
        write_outcome(path, outcome)

    def grade(self, solution: SolutionSource, model: str | Path | None = None,
              time_limit: float = DEFAULT_TIME_LIMIT_S, isolate: bool | None = None) -> GradeResult:
        """``isolate`` (a file only): True needs bubblewrap, False runs the worker in a plain process, None
        takes bubblewrap where there is one."""
        problem = screened(solution, self.functions)
        if problem is not None:
            return self.fail(problem)
        references = PendingReferences(self.workloads, model)
        try:
            warm_up()
            return graded_in_worker(self, solution, time_limit, isolate,
                                    lambda worker: self._run_and_judge(worker, model, references))
        finally:
            references.cancel()

    def _run_and_judge(self, worker: Worker, model: str | Path | None, references: PendingReferences) -> GradeResult:
        with tempfile.TemporaryDirectory(prefix="nanovllm_teach_grade_") as tmp:
            folder = Path(tmp)
            end = run_in_child(self._run_student, worker, folder, model)
            outcome = read_outcome(folder / OUTCOME, Outcome)
            return self._verdict(end, outcome, folder, references.traces())

    def _verdict(self, end: ChildEnd, outcome: Outcome, folder: Path, references: dict) -> GradeResult:
        """The verdict on the child's runs (an exercise judged by other measures gives its own)."""
        events = 0
        for workload in self.workloads:
            verdict = judge(self, self.decisions, workload, load_run(folder / f"{workload.name}.jsonl"),
                            run_failure(end, outcome, workload.name), references[workload.name])
            if verdict is not None:
                return verdict
            events += sum(e.event in self.decisions for e in references[workload.name].events)
        if not outcome.finished or end.exitcode != 0:
            return self.fail(say(ENDED_AFTER_THE_RUNS, code=end.exitcode))
        functions = say(AND).join(self.functions)
        return GradeResult(self.name, True, f"PASS {self.name}: " + say(ALL_MATCH, functions=functions,
                                                                       count=len(self.workloads), decisions=events))
