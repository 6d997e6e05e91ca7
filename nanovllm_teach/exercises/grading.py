"""The autograder's machinery: run a workload on the real engine with a student's piece plugged in, record
its TEACHING trace, and diff it against the reference engine's trace of the same workload.

How one engine exercise is graded:

1. ``Piece``\\ s say which engine attribute each student function replaces (``Scheduler._schedule_decode``,
   ``model_runner.decode_slot``, ...). ``installed()`` swaps them in for the length of one run and always
   puts the originals back, whatever the student's code does.
2. Every student function runs inside a guard that wraps what it raises in a ``StudentError`` (so the
   verdict blames the right function and line) and checks its result before the engine uses it (a float
   slot index, a block count larger than the machine: stopped with a sentence, not a crash inside torch).
3. ``run_workload()`` runs a fixed ``Workload`` (token-id prompts, ``ignore_eos`` so every request runs its
   full length, a small block size and a tiny KV cache so that block boundaries and preemption happen) on
   the shipped model, recording every event with every tensor value.
4. The reference trace is the same workload on the untouched engine, recorded once per process.
   ``diff_traces`` names the first event where the two disagree; the verdict says it in plain words.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
import traceback
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from nanovllm_teach.engine import model_runner
from nanovllm_teach.engine.llm_engine import LLMEngine
from nanovllm_teach.sampling_params import SamplingParams
from nanovllm_teach.trace.diff import Divergence, describe_event, diff_traces
from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.trace.recorder import TraceRecorder
from nanovllm_teach.utils.memory import MemoryReading

# What a solution is once loaded: the names its file (or a notebook) defines.
Solution = dict[str, Any]


@dataclass(frozen=True)
class Workload:
    """A fixed run of the engine: settings, token-id prompts, their lengths and arrival steps.

    ``memory``: when set, the engine reads this instead of the machine's memory, so that a KV budget sized
    "from memory" comes out the same on every machine.
    """

    name: str
    description: str
    settings: dict[str, Any]
    prompts: list[list[int]]
    max_tokens: list[int]
    arrival_steps: list[int] = field(default_factory=list)
    memory: MemoryReading | None = None


@dataclass(frozen=True)
class Piece:
    """One function a student writes, and the engine attribute it replaces.

    ``check`` looks at the function's arguments and result before the engine uses the result; it returns a
    sentence saying what is wrong, or None.
    """

    function: str
    owner: Any  # the class or module holding the attribute
    attribute: str
    check: Callable[[tuple[Any, ...], Any], str | None] | None = None


class StudentError(Exception):
    """A student function raised, or returned something the engine cannot use (``refused``)."""

    def __init__(self, function: str, original: Exception, code_file: str | None, refused: bool = False) -> None:
        super().__init__(f"{function}: {original}")
        self.function = function
        self.original = original
        self.code_file = code_file
        self.refused = refused


@dataclass
class GradeResult:
    """The verdict on one exercise: ``passed``, and ``message``, the sentence a student reads.

    ``workload`` and ``divergence`` say where a failing solution went wrong (None for other failures).
    """

    exercise: str
    passed: bool
    message: str
    workload: str | None = None
    divergence: Divergence | None = None

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"<GradeResult {self.exercise}: {'PASS' if self.passed else 'FAIL'}>"


# ---- loading a solution -------------------------------------------------------------------------------

_module_numbers = itertools.count()


def load_solution(path: str | Path) -> Solution:
    """Execute a student's solution file and return the names it defines.

    Running the student's own code is the point of grading it; each load gets a fresh module, so an edited
    file is read again.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such solution file: {path}")
    spec = importlib.util.spec_from_file_location(f"_nanovllm_teach_solution_{next(_module_numbers)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return vars(module)


def missing_functions(solution: Solution, names: tuple[str, ...]) -> str | None:
    """What is missing if the solution lacks one of ``names`` (or it is not callable), else None."""
    missing = [name for name in names if not callable(solution.get(name))]
    if not missing:
        return None
    return (f"your solution defines no function named {', '.join(missing)}: write "
            f"{'it' if len(missing) == 1 else 'them'} with exactly that name")


# ---- plugging the student's pieces in ----------------------------------------------------------------

def _guarded(piece: Piece, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` as the engine will call it: its exceptions and unusable results become ``StudentError``."""
    code_file = getattr(getattr(fn, "__code__", None), "co_filename", None)

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            result = fn(*args, **kwargs)
        except StudentError:
            raise  # from another of the student's functions, which this one called: that one is to blame
        except Exception as error:
            raise StudentError(piece.function, error, code_file) from error
        problem = piece.check(args, result) if piece.check is not None else None
        if problem is not None:
            raise StudentError(piece.function, ValueError(problem), code_file, refused=True)
        return result

    call.__name__ = piece.function
    return call


@contextmanager
def swapped(owner: Any, attribute: str, value: Any) -> Iterator[None]:
    """``owner.attribute = value`` inside the block; the original comes back however the block ends."""
    original = getattr(owner, attribute)
    setattr(owner, attribute, value)
    try:
        yield
    finally:
        setattr(owner, attribute, original)


@contextmanager
def installed(pieces: tuple[Piece, ...], solution: Solution) -> Iterator[None]:
    """The student's functions in place of the engine's, for the length of the block."""
    with ExitStack() as stack:
        for piece in pieces:
            stack.enter_context(swapped(piece.owner, piece.attribute, _guarded(piece, solution[piece.function])))
        yield


# ---- running a workload -------------------------------------------------------------------------------

@dataclass
class Run:
    """One recorded run: its trace up to the failure (if any), the exception, and where it happened."""

    trace: Trace
    error: Exception | None = None
    where: str | None = None


def _is_cleanup(event_name: str, reason: str) -> bool:
    """Events of the engine tidying up after an exception (generate() aborts every request it holds)."""
    return event_name == "REQUEST_ABORT" or reason == "aborted"


def run_workload(workload: Workload, model: str | Path | None = None, max_steps: int | None = None) -> Run:
    """Run ``workload`` on the engine as it is now (patched or not) and record everything.

    ``max_steps``: stop a run that goes on past this many steps (a student's scheduler can keep preempting
    and recomputing forever)."""
    # Every decode step keeps its tensor values: slot mappings are what some exercises are about.
    recorder = TraceRecorder(detail_decode_steps=sys.maxsize, detail_max_elements=sys.maxsize)
    fixed_memory = (swapped(model_runner, "read_memory", lambda device: workload.memory)
                    if workload.memory is not None else nullcontext())
    engine = None
    error: Exception | None = None
    with fixed_memory:
        try:
            engine = LLMEngine(model, trace=recorder, trace_metadata={"workload": workload.name},
                               **workload.settings)
            if max_steps is not None:
                engine.step = _step_limited(engine, max_steps)
            params = [SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True) for n in workload.max_tokens]
            engine.generate(workload.prompts, params, use_tqdm=False, arrival_steps=workload.arrival_steps or None)
        except Exception as caught:  # the student's code, or the engine tripping over what it returned
            error = caught
        finally:
            if engine is not None:
                engine.close()
    events = recorder.events
    cut = next((k for k, e in enumerate(events) if _is_cleanup(e.event, e.reason)), len(events))
    trace = Trace(dict(recorder.header or {}), events[:cut])
    if error is None:
        return Run(trace)
    if engine is None:
        where = "while the engine was starting"
    elif engine.num_steps == 0:
        where = "before the first step"
    else:
        where = f"in step {engine.num_steps}"
    return Run(trace, error, where)


def _step_limited(engine: Any, max_steps: int) -> Callable[[], Any]:
    """``engine.step`` that refuses to run step ``max_steps + 1``."""
    step = engine.step

    def limited() -> Any:
        if engine.num_steps >= max_steps:
            raise RuntimeError(f"the run was still going after {max_steps} steps, far more than the reference "
                               f"needs: stopped")
        return step()
    return limited


_reference_traces: dict[tuple[str, str], Trace] = {}


def reference_trace(workload: Workload, model: str | Path | None = None) -> Trace:
    """The untouched engine's trace of ``workload`` (recorded once per process)."""
    key = (workload.name, str(model))
    if key not in _reference_traces:
        run = run_workload(workload, model)
        if run.error is not None:
            raise RuntimeError(f"the reference engine failed on workload {workload.name!r}: "
                               f"{run.error}") from run.error
        _reference_traces[key] = run.trace
    return _reference_traces[key]


# ---- the verdict --------------------------------------------------------------------------------------

def _student_line(error: BaseException, code_file: str | None) -> str:
    """`` (your_file.py, line 12: running.popleft())`` — the last line of the student's code that ran."""
    if code_file is None:
        return ""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == code_file]
    if not frames:
        return ""
    frame = frames[-1]
    code = f": {frame.line}" if frame.line else ""
    return f" ({Path(frame.filename).name}, line {frame.lineno}{code})"


def judge(exercise: str, workload: Workload, run: Run, reference: Trace) -> GradeResult | None:
    """A failing verdict for a run that differs from the reference, else None."""
    context = f"FAIL {exercise}, workload {workload.name!r} ({workload.description})"
    fault = run.error if isinstance(run.error, StudentError) else None
    if fault is not None and isinstance(fault.original, NotImplementedError):
        hint = str(fault.original)
        return GradeResult(exercise, False, f"FAIL {exercise}: you have not implemented {fault.function} yet"
                                            + (f" (hint: {hint})" if hint else ""), workload.name)
    divergence = diff_traces(run.trace, reference)
    if run.error is not None and (divergence is None or divergence.yours is None):
        # The run matched the reference right up to the failure: the failure is the first difference.
        if fault is not None and fault.refused:
            message = f"{context}:\n  {run.where}, your {fault.function} {fault.original}"
        elif fault is not None:
            message = (f"{context}:\n  {run.where}, your {fault.function} raised {type(fault.original).__name__}: "
                       f"{fault.original}{_student_line(fault.original, fault.code_file)}")
        else:
            message = (f"{context}:\n  {run.where}, the engine failed on what your code gave it: "
                       f"{type(run.error).__name__}: {run.error}")
        if divergence is not None and divergence.reference is not None:
            ref = divergence.reference
            message += f"\n  (there the reference went on: it {describe_event(ref)}, {ref.event})"
        return GradeResult(exercise, False, message, workload.name, divergence)
    if divergence is None:
        return None
    where = ("the trace headers" if divergence.index is None
             else f"event #{divergence.index} ({divergence.event}, {divergence.where})")
    message = f"{context}:\n  your run first differs from the reference at {where}:\n  {divergence.message}"
    if run.error is not None:
        message += f"\n  (later, {run.where}: {type(run.error).__name__}: {run.error})"
    return GradeResult(exercise, False, message, workload.name, divergence)


# ---- exercises ----------------------------------------------------------------------------------------

_HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Exercise:
    """One classroom exercise: ``functions`` the student writes, a template to start from, a reference
    solution, and a grader (``grade``)."""

    name: str
    title: str
    replaces: str  # the piece of the engine the student rewrites, as a learner finds it in the code
    functions: tuple[str, ...]

    @property
    def template_path(self) -> Path:
        return _HERE / "templates" / f"{self.name}.py"

    @property
    def solution_path(self) -> Path:
        return _HERE / "solutions" / f"{self.name}.py"

    def grade(self, solution: Solution, model: str | Path | None = None) -> GradeResult:
        raise NotImplementedError


@dataclass(frozen=True)
class EngineExercise(Exercise):
    """An exercise graded by running the real engine with the student's ``pieces`` plugged in, on each
    of ``workloads``, and diffing its trace against the reference engine's."""

    pieces: tuple[Piece, ...]
    workloads: tuple[Workload, ...]

    def grade(self, solution: Solution, model: str | Path | None = None) -> GradeResult:
        missing = missing_functions(solution, self.functions)
        if missing is not None:
            return GradeResult(self.name, False, f"FAIL {self.name}: {missing}")
        events = 0
        for workload in self.workloads:
            reference = reference_trace(workload, model)
            with installed(self.pieces, solution):
                run = run_workload(workload, model, max_steps=4 * len(reference.steps) + 20)
            verdict = judge(self.name, workload, run, reference)
            if verdict is not None:
                return verdict
            events += len(reference.events)
        names = " and ".join(self.functions)
        return GradeResult(self.name, True, f"PASS {self.name}: with your {names} the engine's trace matches the "
                                            f"reference event for event on all {len(self.workloads)} workloads "
                                            f"({events} events)")
