"""The grading child process: the engine's graded runs happen there, under a time limit.

Role: grading. Emits no events.

``run_in_child(target, ...)`` forks a child that calls ``target(watch, ...)`` and waits for it. The
child holds only proxies: the student's code runs in the sandboxed worker (``remote``), and neither the
child nor the parent ever runs it, so nothing it does (patching the engine, replacing the grader's
``judge`` or ``diff_traces``, ``sys.exit``) reaches the verdict, which the parent computes from the trace
files and the small outcome record the child leaves behind. The child:

- reports through ``SharedWatch`` which student function is running and since when. A call that does not
  return within ``time_limit`` seconds is given up by its proxy, and the child records where it was (the
  tensor being loaded, the step) before it ends; the parent stops the child itself, and says which
  function ran, only if it is still in that call ``REPORT_GRACE_S`` later;
- runs torch on one thread: the shipped model is tiny, and a forked child must not reuse the parent's
  OpenMP thread pool (it hangs);
- speaks the parent's language (``i18n.resolve_lang`` in the parent, ``set_lang`` in the child): the few
  sentences worded there (a result a check refused) read as the verdict around them does.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from nanovllm_teach.i18n import Text, resolve_lang, say, set_lang

# The longest a whole grading run may take, however fast each call returns (the reference needs ~1 s).
RUN_LIMIT_S = 120.0
# How long after a call's time limit the parent waits for the child's own record of the failure: with the
# parent's look at the same moment, a loaded machine (the test suite's fresh-clone run) lost the record, and
# the verdict lost where the call was.
REPORT_GRACE_S = 5.0
_NAME_BYTES = 96
# A class is graded by several threads; one forks at a time, so that no child starts with a lock another
# thread held at that moment.
FORKING = threading.Lock()


NO_FORK = Text(en="the grader runs your code in a forked process, which this system cannot make (on Windows, use WSL)",
               zh="评分器要在 fork 出的子进程里运行你的代码，而这个系统做不到（在 Windows 上请使用 WSL）")


class SharedWatch:
    """Which student function runs now and since when, in memory shared by the parent and the child."""

    def __init__(self, ctx: Any) -> None:
        self._name = ctx.RawArray("c", _NAME_BYTES)
        self._since = ctx.RawValue("d", 0.0)

    def enter(self, function: str) -> str:
        previous = self.running()
        self._set(function)
        return previous

    def leave(self, previous: str) -> None:
        self._set(previous)

    def _set(self, function: str) -> None:
        self._name.value = function.encode()[:_NAME_BYTES - 1]
        self._since.value = time.monotonic()

    def running(self) -> str:
        return self._name.value.decode(errors="replace")

    def running_for(self) -> float:
        return time.monotonic() - self._since.value if self.running() else 0.0


@dataclass(frozen=True)
class ChildEnd:
    """How the child ended: its exit code (None when the parent stopped it), the student function running
    at that moment (``running``; "" when none was), and for a stopped child the limit it ran into."""

    exitcode: int | None
    running: str = ""
    limit: float | None = None


def _child_main(watch: SharedWatch, lang: str, target: Callable[..., None], args: tuple[Any, ...]) -> None:
    set_lang(lang)  # the parent's language, whatever this process's environment says
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
    else:  # imported later, if at all (a quiz needs no torch)
        os.environ["OMP_NUM_THREADS"] = "1"
    target(watch, *args)
    sys.stdout.flush()
    sys.stderr.flush()
    # Not the interpreter's own shutdown: forked from a thread of a class's pool, it would wait on the
    # pool's threads, which do not exist here, and end with exit code 1.
    os._exit(0)


def run_in_child(target: Callable[..., None], *args: Any, time_limit: float) -> ChildEnd:
    """Run ``target(watch, *args)`` in a forked child; stop it if one student call outlasts ``time_limit``
    seconds (and the child has not ended ``REPORT_GRACE_S`` later) or the whole run ``RUN_LIMIT_S``."""
    if "fork" not in multiprocessing.get_all_start_methods():
        raise RuntimeError(say(NO_FORK))
    ctx = multiprocessing.get_context("fork")
    watch = SharedWatch(ctx)
    child = ctx.Process(target=_child_main, args=(watch, resolve_lang(), target, args), daemon=True)
    with FORKING:
        sys.stdout.flush()  # else what the parent has buffered is printed again when the child exits
        sys.stderr.flush()
        child.start()
    started = time.monotonic()
    try:
        while True:
            child.join(0.05)
            if child.exitcode is not None:
                return ChildEnd(child.exitcode, watch.running())
            if watch.running() and watch.running_for() > time_limit + REPORT_GRACE_S:
                return _stop(child, ChildEnd(None, watch.running(), time_limit))
            if time.monotonic() - started > RUN_LIMIT_S:
                return _stop(child, ChildEnd(None, "", RUN_LIMIT_S))
    except BaseException:  # Ctrl-C in the parent: the child goes too
        _stop(child, ChildEnd(None, watch.running()))
        raise


def _stop(child: Any, end: ChildEnd) -> ChildEnd:
    child.kill()
    child.join()
    return end


def write_outcome(path: Path, outcome: dict[str, Any]) -> None:
    """Replace the outcome record at ``path`` in one step (a killed child leaves the previous one whole)."""
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(outcome))
    os.replace(partial, path)


def read_outcome(path: Path) -> dict[str, Any]:
    """The child's outcome record; empty if it left none (or none that parses)."""
    try:
        outcome = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return outcome if isinstance(outcome, dict) else {}
