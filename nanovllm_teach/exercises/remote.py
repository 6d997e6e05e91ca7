"""The engine's side of the sandbox's edge: start a worker, call the learner's function there, end it.

Role: grading (the parent, and the engine's grading child). Emits no events.

``Worker(solution, functions, points, time_limit)`` starts the worker (``worker``) for one submission: a file runs
in bubblewrap where ``isolation.available()`` (else in a plain process, ``isolated`` False), as a job slot's own
user id and in a cgroup of its own where the machine gives them (``confinement``); functions from a notebook run
in a forked process (they exist only in this process's memory), where importing the reference solutions raises
(``refuse_reference_solutions``: the grading copy a file runs on has none). ``load()`` says whether the file
loaded; ``proxies(pieces)`` are the functions the engine is given in place of the
learner's: each sends its arguments (``msgspec``: plain data, never a live engine object) and returns what
came back, or raises ``RemoteFailure`` with what the learner's function raised, a time-out, or the worker's
end. Every word of the learner's that comes back (what it raised, its line of code, what it printed) is
made ``visible`` (no line break, no carriage return, no escape code) before any sentence holds it, so that
none can start a line of the grader's output. ``close()`` kills the worker and everything it started, and
returns what it printed, quoted (``quoted``) so that it can never pass for a verdict; with a slot's user id it
returns only once no process of that user is left.
"""

from __future__ import annotations

import importlib.abc
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import msgspec

from nanovllm_teach.exercises import confinement, isolation
from nanovllm_teach.exercises.base import is_reference_module, visible
from nanovllm_teach.exercises.sandbox import FORKING
from nanovllm_teach.exercises.worker import FrameError, read_frame, serve, write_frame
from nanovllm_teach.i18n import Text, say

# The learner's prints kept for the verdict: the first lines, the first characters.
OUTPUT_LINES = 20
OUTPUT_CHARS = 2000
QUOTE = "  | "
# How long a worker may take to start (an interpreter in the sandbox) before the file's own time limit starts:
# on a busy machine that is seconds, and none of them the learner's.
STARTUP_LIMIT_S = 60.0


class SolutionsImportRefused(ImportError):
    """The student's code imported the reference solutions while being graded."""


IMPORT_REFUSED = Text(en="{module} (a reference solution) cannot be imported while grading: write your own code",
                      zh="评分期间不能导入 {module}（参考答案）：请写你自己的代码")


class _RefuseSolutions(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if is_reference_module(fullname):
            raise SolutionsImportRefused(say(IMPORT_REFUSED, module=fullname))
        return None


def refuse_reference_solutions() -> None:
    """From now on, in this process, importing the reference solutions raises ``SolutionsImportRefused``."""
    for name in [n for n in sys.modules if is_reference_module(n)]:
        package, _, attribute = name.rpartition(".")
        del sys.modules[name]
        if hasattr(sys.modules.get(package), attribute):
            delattr(sys.modules[package], attribute)
    sys.meta_path.insert(0, _RefuseSolutions())


class RemoteFailure(Exception):
    """The learner's function, called in the worker, did not give a usable answer: ``description`` is what
    ``pieces.describe_failure`` reports (what it raised, or ``timeout``, or ``exitcode``)."""

    def __init__(self, description: dict[str, Any]) -> None:
        super().__init__(description.get("message", ""))
        self.description = description


def quoted(output: bytes) -> str:
    """What the learner's code printed, safe to show: bounded, every line behind a quote mark (no line can
    read as "PASS ..."), control characters (escape codes, carriage returns) made ``visible``."""
    text = output.decode("utf-8", errors="replace")
    lines = text[:OUTPUT_CHARS].split("\n")
    shown = [visible(line) for line in lines[:OUTPUT_LINES]]
    if len(lines) > OUTPUT_LINES or len(text) > OUTPUT_CHARS:
        shown.append("...")
    return "\n".join(QUOTE + line for line in shown)


def described(error: Any) -> dict[str, Any]:
    """What the worker says the learner's code raised (``worker.describe_error``), checked and made
    ``visible``: ``type``, ``message`` (bounded), ``at`` (file, line, code) or None, ``not_implemented``."""
    error = error if isinstance(error, dict) else {}
    at = error.get("at")
    return {"type": visible(str(error.get("type", "Exception"))[:80]),
            "message": visible(str(error.get("message", ""))[:500]),
            "not_implemented": error.get("not_implemented") is True,
            "at": [visible(str(at[0])), int(at[1]), visible(str(at[2]))] if isinstance(at, list) and len(at) == 3
            and isinstance(at[1], int) else None}


def _serve_forked(solution: dict[str, Any], calls_fd: int, answers_fd: int) -> None:
    refuse_reference_solutions()  # the learner's functions run here, in a process forked from a notebook
    serve(solution, None, calls_fd, answers_fd)


class Worker:
    """One submission's worker, from start to ``close``."""

    def __init__(self, solution: Path | dict[str, Any], functions: tuple[str, ...], points: tuple[str, ...],
                 time_limit: float, isolate: bool | None = None) -> None:
        """``points``: the exercise points the learner rewrites (they raise in the worker's copy)."""
        self.functions = functions
        self.time_limit = time_limit
        self.tag = f"nanovllm-teach-worker-{uuid.uuid4().hex}"
        self.isolated = isinstance(solution, Path) and (isolation.available() if isolate is None else isolate)
        calls_r, self._calls_w = os.pipe()
        self._answers_r, answers_w = os.pipe()
        self._output = tempfile.TemporaryFile()
        self._process: Any = None
        self._forked: Any = None
        self.confined: confinement.Confined | None = None  # the host's side: the slot's user id, the cgroup
        try:
            if isinstance(solution, Path):
                self.confined = confinement.Confined(solution, self.tag, isolation.uid_drop())
                slot = self.confined.slot
                command = isolation.worker_command(self.confined.submission, functions, points, (calls_r, answers_w),
                                                   self.tag, self.isolated, None if slot is None else slot.uid)
                # The grader's environment stays out: only a learner's own self-check, as that learner, keeps it.
                plain = not self.isolated and self.confined.slot is None
                self._process = self.confined.start(command, stdout=self._output, stderr=subprocess.STDOUT,
                                                     pass_fds=(calls_r, answers_w),
                                                     env=None if plain else isolation.LAUNCH_ENVIRONMENT)
            else:
                ctx = multiprocessing.get_context("fork")
                self._forked = ctx.Process(target=_serve_forked, args=(solution, calls_r, answers_w), daemon=True)
                with FORKING:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    self._forked.start()
        except BaseException:
            if self.confined is not None:
                self.confined.end(self._process)
            raise
        finally:
            os.close(calls_r)
            os.close(answers_w)

    def load(self) -> dict[str, Any]:
        """The worker's first answer: ``{"loaded": True}``, ``{"load_error": ...}``, ``{"missing": [...]}``,
        or ``{"timeout": limit}`` / ``{"ended": exit code}``. Functions from a notebook are there already."""
        if self._forked is not None:
            return {"loaded": True}
        try:
            ready = read_frame(self._answers_r, time.monotonic() + STARTUP_LIMIT_S)
            if ready != {"ready": True}:
                return {"ended": None}
            answer = read_frame(self._answers_r, time.monotonic() + self.time_limit)
        except TimeoutError:
            return {"timeout": self.time_limit}
        except FrameError:
            return {"ended": self._exitcode()}
        if isinstance(answer, dict) and "load_error" in answer:
            return {"load_error": described(answer["load_error"])}
        return answer if isinstance(answer, dict) else {"ended": None}

    def call(self, function: str, args: tuple[Any, ...], types: tuple[str, ...], adapter: str | None = None) -> Any:
        """``function(*args)`` in the worker (``adapter(function, *args)`` with one, see ``worker.serve``):
        its result (plain data), or ``RemoteFailure``."""
        try:
            frame = {"function": function, "args": [msgspec.to_builtins(a) for a in args], "types": list(types)}
            write_frame(self._calls_w, {**frame, "adapter": adapter} if adapter else frame)
            answer = read_frame(self._answers_r, time.monotonic() + self.time_limit)
        except TimeoutError:
            raise RemoteFailure({"function": function, "timeout": self.time_limit}) from None
        except (FrameError, OSError):
            raise RemoteFailure({"function": function, "exitcode": self._exitcode()}) from None
        if isinstance(answer, dict) and "result" in answer:
            return answer["result"]
        error = answer.get("error") if isinstance(answer, dict) else None
        if not isinstance(error, dict):
            raise RemoteFailure({"function": function, "exitcode": self._exitcode()})
        return self._raise(function, error)

    @staticmethod
    def _raise(function: str, error: dict[str, Any]) -> Any:
        raise RemoteFailure({"function": function, "refused": False, **described(error)})

    def _exitcode(self) -> int | None:
        process = self._process or self._forked
        try:
            return process.wait(1) if self._process is not None else (process.join(1) or process.exitcode)
        except subprocess.TimeoutExpired:
            return None

    def proxies(self, pieces: tuple[Any, ...]) -> dict[str, Callable[..., Any]]:
        """The functions the engine calls in place of the learner's (one per piece with a ``wire`` or a
        ``state``)."""
        def proxy(piece: Any) -> Callable[..., Any]:
            def call(*args: Any) -> Any:
                if piece.state is not None:  # the objects it acts on go as a snapshot, and come back changed
                    return piece.state.call(self, piece.function, args)
                return self.call(piece.function, piece.encode(args) if piece.encode else args, piece.wire)
            call.__name__ = piece.function
            return call

        return {piece.function: proxy(piece) for piece in pieces}

    def close(self) -> str:
        """End the worker and all it started; what it printed, ``quoted`` ("" if nothing)."""
        for fd in (self._calls_w, self._answers_r):
            try:
                os.close(fd)
            except OSError:
                pass
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
