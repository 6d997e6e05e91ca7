"""The sandbox a learner's file runs in: bubblewrap (Debian's ``bubblewrap``, what Flatpak builds on).

Role: grading, the sandbox's walls. Emits no events.

``worker_command`` is the command line of one sandboxed worker (``worker``). Inside bubblewrap:

- the interpreter, its libraries and the grading copy of the package are read-only; nothing else of the
  machine is there (no ``/etc``, no home, no repository, no other learner's folder, no kernel cache);
- ``/tmp`` and ``HOME`` are private, small in-memory folders, the only places it can write;
- no network, its own PID namespace (``--unshare-all``): when the worker's bubblewrap is killed, every
  process it started dies with it, a ``setsid`` grandchild included (``--die-with-parent``);
- no capabilities, an unprivileged user id, a new session (no terminal to inject keystrokes into);
- nothing of the grader's environment: bubblewrap itself starts with ``BWRAP_ENVIRONMENT`` only, the
  learner's process with ``--clearenv`` and the three variables it needs;
- the worker itself sets limits on address space, CPU seconds, file size, processes and open files
  (``LIMITS``) before the learner's file is loaded.

``grading_root()`` is the package as graded: a copy of its Python files in a temporary folder, without the
reference solutions, in which the exercise's points (the engine's own implementation a learner rewrites)
raise "not available while grading". Without bubblewrap (``available()`` is False: macOS, a machine
without it), the worker still runs on that copy, in a process of its own with the same limits, and the
verdict says it was not isolated.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from nanovllm_teach.exercises.base import SOLUTION_FILE
from nanovllm_teach.i18n import Text, resolve_lang, say

PACKAGE = Path(__file__).resolve().parents[1]
INSIDE_ROOT = "/grader"  # where the grading copy of the package is seen inside the sandbox
INSIDE_HOME = "/home/learner"
INSIDE_SUBMISSION = "/submission"
SANDBOX_UID = 65534  # nobody
_TMPFS_BYTES = 16 << 20
# What bubblewrap itself is started with. It is pid 1 inside, and its own /proc/1/environ is readable there:
# ``--clearenv`` cleans only the learner's process, so the grader's environment (a teacher's token) stays out.
BWRAP_ENVIRONMENT = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}

NOT_ISOLATED = Text(en="note: bubblewrap is not available here, so your code ran in a plain process, not isolated "
                       "from this machine",
                    zh="注意：这里没有 bubblewrap，你的代码在普通进程中运行，没有与这台机器隔离")
# What the engine's own implementation of an exercise point raises in the grading copy.
NOT_AVAILABLE = Text(en="the engine's own {name} is not available while grading: write your own code",
                     zh="评分期间不能使用引擎自己的 {name}：请写你自己的代码")


@dataclass(frozen=True)
class Limits:
    """What one worker may use: bytes of address space, CPU seconds, bytes per file, processes, open files."""

    address_space: int = 1 << 30  # enough to import torch (the cheat that calls the engine does), no more
    cpu_s: int = 60
    file_size: int = 1 << 20
    processes: int = 16
    open_files: int = 64

    def argument(self) -> str:
        return f"{self.address_space},{self.cpu_s},{self.file_size},{self.processes},{self.open_files}"


LIMITS = Limits()


def bwrap() -> str | None:
    """The bubblewrap executable, if installed."""
    return shutil.which("bwrap")


@functools.cache
def available() -> bool:
    """Whether bubblewrap is installed and can make its namespaces here (a container may forbid them)."""
    if bwrap() is None:
        return False
    probe = [*_walls(), "--", "/bin/true"]
    try:
        return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _disabled(point: str, lang: str) -> str:
    """Python appended to the grading copy of the module holding ``point``: the point raises."""
    attribute = point.partition(":")[2]
    stand_in = f"_graded_{attribute.replace('.', '_')}"
    message = say(NOT_AVAILABLE, lang, name=attribute.rpartition(".")[2])
    return (f"\n\ndef {stand_in}(*args, **kwargs):\n    raise RuntimeError({message!r})\n\n\n"
            f"{attribute} = {stand_in}\n")


def make_grading_root(folder: Path, points: list[str], lang: str) -> Path:
    """Copy the package's Python files into ``folder`` (no reference solutions, no model), disabling
    ``points`` (their message in ``lang``); the folder to put first on the worker's ``sys.path``."""
    for source in PACKAGE.rglob("*.py"):
        relative = source.relative_to(PACKAGE)
        if "__pycache__" in relative.parts or (source.name == SOLUTION_FILE and relative.parts[0] == "exercises"):
            continue
        target = folder / "nanovllm_teach" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    for point in points:
        module = point.partition(":")[0]
        path = folder.joinpath(*module.split(".")).with_suffix(".py")
        with path.open("a", encoding="utf-8") as file:
            file.write(_disabled(point, lang))
    for path in folder.rglob("*"):
        path.chmod(0o555 if path.is_dir() else 0o444)
    folder.chmod(0o555)
    return folder


@functools.cache
def grading_root(lang: str, points: tuple[str, ...]) -> Path:
    """This process's grading copy of the package for an exercise whose exercise points are ``points``,
    speaking ``lang`` (made once, removed at exit). Only the exercise's own points raise: the rest of the
    engine is there for the learner's function to use (a ``schedule_decode`` calls ``can_append``)."""
    folder = Path(tempfile.mkdtemp(prefix="nanovllm_teach_grading_root_"))
    atexit.register(_remove, folder)
    return make_grading_root(folder, sorted(points), lang)


def _remove(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    shutil.rmtree(folder, ignore_errors=True)


def _read_only_binds() -> list[str]:
    """The interpreter and its libraries, each bound read-only at its own path."""
    paths = {"/usr", sys.base_prefix, sys.prefix, *(p for p in sys.path if p and Path(p).is_dir())}
    paths = {str(Path(p).resolve()) for p in paths} | {sys.base_prefix, sys.prefix}
    # The repository (the current folder of `python -m`, PYTHONPATH, a test runner's folders) stays out: the
    # grading copy stands in for it. A virtual environment inside it (the README's .venv) is still bound.
    repository, environment = str(PACKAGE.parent) + "/", str(Path(sys.prefix).resolve()) + "/"
    paths = {p for p in paths if not (p + "/").startswith(repository) or (p + "/").startswith(environment)}
    kept = sorted(p for p in paths if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in paths))
    args = []
    for path in kept:
        args += ["--ro-bind", path, path]
    for link in ("/bin", "/lib", "/lib64", "/sbin"):
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    return args


def _walls() -> list[str]:
    # The private /tmp first: bubblewrap mounts in order, and an interpreter or a virtual environment that lives
    # under /tmp (a CI runner's clone) is then bound on top of it instead of hidden under it.
    return [bwrap() or "bwrap", "--size", str(_TMPFS_BYTES), "--tmpfs", "/tmp", *_read_only_binds(),
            "--size", str(_TMPFS_BYTES), "--tmpfs", INSIDE_HOME,
            "--proc", "/proc", "--dev", "/dev", "--unshare-all", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
            "--clearenv", "--setenv", "HOME", INSIDE_HOME, "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
            "--setenv", "LANG", "C.UTF-8", "--chdir", INSIDE_HOME]


def worker_command(solution: Path, functions: tuple[str, ...], points: tuple[str, ...], fds: tuple[int, int],
                   tag: str, isolated: bool, limits: Limits = LIMITS) -> list[str]:
    """The command line of a worker serving ``functions`` from ``solution``, on ``fds`` (calls in, answers
    out), on the grading copy where ``points`` raise; ``tag`` marks its processes (tests look for them);
    ``isolated``: inside bubblewrap."""
    root = grading_root(resolve_lang(), points)
    worker_args = [",".join(functions), limits.argument(), f"{fds[0]},{fds[1]}", tag]
    if not isolated:
        return [sys.executable, "-E", "-s", "-u", str(root / "nanovllm_teach" / "exercises" / "worker.py"), str(root),
                str(solution), *worker_args]
    inside = f"{INSIDE_SUBMISSION}/{solution.name}"
    return [*_walls(), "--ro-bind", str(root), INSIDE_ROOT, "--ro-bind", str(solution), inside, "--",
            sys.executable, "-E", "-s", "-u", f"{INSIDE_ROOT}/nanovllm_teach/exercises/worker.py", INSIDE_ROOT, inside,
            *worker_args]
