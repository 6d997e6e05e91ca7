"""The two processes the grader starts for a submission, and what crosses back from them.

Role: grading (the parent, and the engine's grading child). Emits no events.

``Worker`` runs the learner's code (a file in the sandbox; a notebook's functions in a fork that cannot import
the reference solutions) and answers the engine's ``call``s in its place. ``run_in_child`` runs the engine on
them in a forked child, so that nothing the answers do to the engine reaches the verdict. Every word of the
learner's that comes back is checked and made ``visible``, and their prints are ``quoted``: none can pass for
a verdict.
"""

from __future__ import annotations

import importlib.abc
import multiprocessing
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import msgspec

from nanovllm_teach.exercises import confinement, isolation
from nanovllm_teach.exercises.base import is_reference_module, missing_sentence, visible
from nanovllm_teach.exercises.worker import Failure, FrameError, read_frame, serve, write_frame
from nanovllm_teach.i18n import Text, resolve_lang, say, set_lang

# The learner's prints kept for the verdict: the first lines, the first characters.
OUTPUT_LINES = 20
OUTPUT_CHARS = 2000
QUOTE = "  | "
# How long a worker's interpreter may take to start, before the file's own time limit: none of it the learner's.
STARTUP_LIMIT_S = 60.0
# The longest a whole grading run may take, however fast each call returns (the reference needs ~1 s). A call
# has its own limit, the worker's answer's deadline (``Worker.call``): the child records that failure itself.
RUN_LIMIT_S = 120.0
# A class is graded by several threads; one forks at a time, so that no child starts with a lock another
# thread held at that moment.
FORKING = threading.Lock()

IMPORT_REFUSED = Text(en="{module} (a reference solution) cannot be imported while grading: write your own code",
                      zh="评分期间不能导入 {module}（参考答案）：请写你自己的代码")
NO_FORK = Text(en="the grader runs your code in a forked process, which this system cannot make (on Windows, use WSL)",
               zh="评分器要在 fork 出的子进程里运行你的代码，而这个系统做不到（在 Windows 上请使用 WSL）")

# Said when the learner's file did not load.
NOT_LOADED = Text(en="your file could not be loaded: {type}: {message}", zh="你的文件无法加载：{type}：{message}")
LOADING_TOO_LONG = Text(en="your file did not finish loading within {limit:g} s (does it run something forever at "
                           "the top level?): the grader stopped it",
                        zh="你的文件在 {limit:g} 秒内没有加载完（它是否在顶层运行着永不结束的代码？）：评分器已将它停止")
ENDED_WHILE_LOADING = Text(en="your file ended the grading process while it was loading (exit code {code}): does "
                              "it call os._exit?",
                           zh="你的文件在加载时结束了评分进程（退出码 {code}）：它是否调用了 os._exit？")


class _RefuseSolutions(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if is_reference_module(fullname):
            raise ImportError(say(IMPORT_REFUSED, module=fullname))
        return None


def _serve_forked(solution: dict[str, Any], calls_fd: int, answers_fd: int) -> None:
    # The learner's functions run here, forked from a notebook that may have imported the reference solutions:
    # they go, and importing them raises from now on.
    for name in [n for n in sys.modules if is_reference_module(n)]:
        package, _, attribute = name.rpartition(".")
        del sys.modules[name]
        if hasattr(sys.modules.get(package), attribute):
            delattr(sys.modules[package], attribute)
    sys.meta_path.insert(0, _RefuseSolutions())
    serve(solution, None, calls_fd, answers_fd)


class RemoteFailure(Exception):
    """The learner's function, called in the worker, did not give a usable answer: ``failure`` says why."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


def quoted(output: bytes) -> str:
    """What the learner's code printed, bounded, every line behind a quote mark (none can read as "PASS ...")."""
    text = output.decode("utf-8", errors="replace")
    lines = text[:OUTPUT_CHARS].split("\n")
    shown = [visible(line) for line in lines[:OUTPUT_LINES]]
    if len(lines) > OUTPUT_LINES or len(text) > OUTPUT_CHARS:
        shown.append("...")
    return "\n".join(QUOTE + line for line in shown)


def described(error: Any, function: str | None = None) -> Failure | None:
    """What the worker says the learner's code raised, checked as a ``Failure`` (None: it is not one). Only what
    it raised can come from there: how the call ended (a refusal, a time-out, an exit) is the grader's to say."""
    try:
        said = msgspec.convert(error, Failure)
    except msgspec.ValidationError:
        return None
    at = said.at and (visible(said.at[0][:200]), said.at[1], visible(said.at[2][:200]))
    return Failure(function, visible(said.type[:80]) or "Exception", visible(said.message[:500]), at,
                   said.not_implemented)


def fork(target: Callable[..., None], *args: Any) -> Any:
    if "fork" not in multiprocessing.get_all_start_methods():
        raise RuntimeError(say(NO_FORK))
    child = multiprocessing.get_context("fork").Process(target=target, args=args, daemon=True)
    with FORKING:
        sys.stdout.flush()  # else what the parent has buffered is printed again when the child exits
        sys.stderr.flush()
        child.start()
    return child


class Worker:
    """One submission's worker; ``points``: the exercise points the learner rewrites (they raise in its copy)."""

    def __init__(self, solution: Path | dict[str, Any], functions: tuple[str, ...], points: tuple[str, ...],
                 time_limit: float, isolate: bool | None = None) -> None:
        self.functions, self.time_limit = functions, time_limit
        self.tag = f"nanovllm-teach-worker-{uuid.uuid4().hex}"
        self.isolated = isinstance(solution, Path) and (isolation.available() if isolate is None else isolate)
        calls_r, self._calls_w = os.pipe()
        self._answers_r, answers_w = os.pipe()
        self._output = tempfile.TemporaryFile()
        self._process: Any = None
        self._forked: Any = None
        self.confined: confinement.Confined | None = None
        try:
            if isinstance(solution, Path):
                self.confined = confinement.Confined(solution, self.tag, isolation.uid_drop())
                inside = f"{isolation.INSIDE_SUBMISSION}/{solution.name}"
                # worker.py ROOT SOLUTION FUNCTIONS LIMITS FDS TAG (the tag marks its processes: tests look for them)
                self._process = isolation.launch(
                    self.confined, self.isolated, "exercises/worker.py", points,
                    ((inside, self.confined.submission),),
                    [",".join(functions), confinement.LIMITS.argument(), f"{calls_r},{answers_w}", self.tag],
                    (calls_r, answers_w), self._output)
            else:
                self._forked = fork(_serve_forked, solution, calls_r, answers_w)
        except BaseException:  # nothing of a worker that did not start stays open in a grader that goes on
            if self.confined is not None:
                self.confined.end(self._process)
            os.close(self._calls_w)
            os.close(self._answers_r)
            self._output.close()
            raise
        finally:
            os.close(calls_r)
            os.close(answers_w)

    def load(self) -> str | None:
        """Why the learner's file did not load, said (None: it loaded, and every function is there)."""
        if self._forked is not None:
            return None
        answer = None
        try:
            if read_frame(self._answers_r, time.monotonic() + STARTUP_LIMIT_S) == {"ready": True}:
                answer = read_frame(self._answers_r, time.monotonic() + self.time_limit)
        except TimeoutError:
            return say(LOADING_TOO_LONG, limit=self.time_limit)
        except FrameError:
            pass
        if answer == {"loaded": True}:
            return None
        if isinstance(answer, dict) and isinstance(answer.get("missing"), list):
            return missing_sentence([name for name in self.functions if name in answer["missing"]]
                                    or list(self.functions))
        error = described(answer.get("load_error")) if isinstance(answer, dict) else None
        if error is not None:
            return say(NOT_LOADED, type=error.type, message=error.message)
        return say(ENDED_WHILE_LOADING, code=self._exitcode())

    def call(self, function: str, args: tuple[Any, ...], types: tuple[str, ...], adapter: str | None = None) -> Any:
        deadline = time.monotonic() + self.time_limit  # for the call and its answer together
        try:
            frame = {"function": function, "args": [msgspec.to_builtins(a) for a in args], "types": list(types)}
            write_frame(self._calls_w, {**frame, "adapter": adapter} if adapter else frame, deadline)
            answer = read_frame(self._answers_r, deadline)
        except TimeoutError:
            raise RemoteFailure(Failure(function, timeout=self.time_limit)) from None
        except (FrameError, OSError):
            raise RemoteFailure(Failure(function, exitcode=self._exitcode())) from None
        if isinstance(answer, dict) and "result" in answer:
            return answer["result"]
        error = described(answer.get("error"), function) if isinstance(answer, dict) else None
        raise RemoteFailure(error or Failure(function, exitcode=self._exitcode()))

    def _exitcode(self) -> int | None:
        process = self._process or self._forked
        try:
            return process.wait(1) if self._process is not None else (process.join(1) or process.exitcode)
        except subprocess.TimeoutExpired:
            return None

    def close(self) -> str:
        """End the worker and all it started; what it printed, ``quoted``."""
        os.close(self._calls_w)
        os.close(self._answers_r)
        if self.confined is not None:
            self.confined.end(self._process)
        if self._forked is not None:
            self._forked.kill()
            self._forked.join()
        self._output.seek(0)
        output = self._output.read(OUTPUT_CHARS * 4)
        self._output.close()
        return quoted(output) if output.strip() else ""

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: Any) -> None:
        if not self._output.closed:
            self.close()


@dataclass(frozen=True)
class ChildEnd:
    """How the child ended: its exit code (None: the parent stopped it, at ``limit``)."""

    exitcode: int | None
    limit: float | None = None

    def failure(self) -> Failure:
        """What a run the child left unfinished, saying nothing, failed of."""
        return Failure(None, timeout=self.limit, exitcode=self.exitcode)


def _child_main(lang: str, target: Callable[..., None], args: tuple[Any, ...]) -> None:
    set_lang(lang)  # the parent's language, whatever this process's environment says
    torch = sys.modules.get("torch")
    if torch is not None:  # one thread: a forked child that reuses the parent's OpenMP pool hangs
        torch.set_num_threads(1)
    else:  # imported later, if at all (a quiz needs no torch)
        os.environ["OMP_NUM_THREADS"] = "1"
    target(*args)
    sys.stdout.flush()
    sys.stderr.flush()
    # Not the interpreter's own shutdown: forked from a thread of a class's pool, it would wait on the
    # pool's threads, which do not exist here, and end with exit code 1.
    os._exit(0)


def run_in_child(target: Callable[..., None], *args: Any) -> ChildEnd:
    """``target(*args)`` in a forked child, stopped if the whole run outlasts ``RUN_LIMIT_S``."""
    child = fork(_child_main, resolve_lang(), target, args)
    try:
        child.join(RUN_LIMIT_S)
        return ChildEnd(child.exitcode) if child.exitcode is not None else ChildEnd(None, RUN_LIMIT_S)
    finally:
        if child.exitcode is None:  # stopped, or Ctrl-C in the parent: the child goes too
            child.kill()
            child.join()


class Outcome(msgspec.Struct):
    """What the child leaves besides its trace files: how each run failed (None: it did not), in order run."""

    runs: dict[str, Failure | None] = {}
    finished: bool = False


def write_outcome(path: Path, outcome: msgspec.Struct) -> None:
    """In one step: a killed child leaves the previous record whole."""
    partial = path.with_suffix(".partial")
    partial.write_bytes(msgspec.json.encode(outcome))
    os.replace(partial, path)


def read_outcome(path: Path, kind: type[msgspec.Struct]) -> Any:
    """The child's record, or an empty one if it left none that reads as a ``kind``."""
    try:
        return msgspec.json.decode(path.read_bytes(), type=kind)
    except (OSError, msgspec.DecodeError):
        return kind()
