"""The sandbox a learner's file runs in: bubblewrap (Debian's ``bubblewrap``, what Flatpak builds on).

Role: grading, the sandbox's walls. Emits no events.

``worker_command`` is the command line of one sandboxed worker (``worker``). Inside bubblewrap:

- the interpreter, its libraries and the grading copy of the package are read-only; nothing else of the
  machine is there (no ``/etc``, no home, no repository, no other learner's folder, no kernel cache);
- ``/tmp``, ``HOME`` and ``/dev/shm`` are private in-memory folders of ``TMPFS_BYTES`` each, the only places
  it can write (``/dev`` itself is read-only);
- no network, its own PID namespace (``--unshare-all``): when the worker's bubblewrap is killed, every
  process it started dies with it, a ``setsid`` grandchild included (``--die-with-parent``);
- no capabilities, a new session (no terminal to inject keystrokes into), and outside the namespace the
  slot's own unprivileged user id where the grader is root (``confinement``: its rlimits bind, its cgroup
  bounds the whole sandbox, every process of it is killed at the end);
- nothing of the grader's environment: bubblewrap itself starts with ``BWRAP_ENVIRONMENT`` only (it is pid 1
  inside, and its ``/proc/1/environ`` is readable there), the learner's process with ``--clearenv`` and the
  three variables it needs;
- the worker itself sets limits on address space, CPU seconds, file size, processes and open files
  (``confinement.Limits``) before the learner's file is loaded.

``grading_root()`` is the package as graded: a copy of its Python files in a temporary folder, without the
reference solutions, in which the exercise's points (the engine's own implementation a learner rewrites)
raise "not available while grading". Without bubblewrap (``available()`` is False: macOS, a machine
without it, a container that forbids its namespaces), the worker still runs on that copy, in a process of
its own with the same limits (as the slot's user where the grader is root), and the verdict says it was not
isolated.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from nanovllm_teach.exercises import confinement
from nanovllm_teach.exercises.base import SOLUTION_FILE
from nanovllm_teach.exercises.confinement import LIMITS, Limits
from nanovllm_teach.i18n import Text, resolve_lang, say

PACKAGE = Path(__file__).resolve().parents[1]
INSIDE_ROOT = "/grader"  # where the grading copy of the package is seen inside the sandbox
INSIDE_HOME = "/home/learner"
INSIDE_SUBMISSION = "/submission"
SANDBOX_UID = 65534  # nobody, inside the namespace
TMPFS_BYTES = 16 << 20
# What bubblewrap itself is started with. It is pid 1 inside, and its own /proc/1/environ is readable there:
# ``--clearenv`` cleans only the learner's process, so the grader's environment (a teacher's token) stays out.
BWRAP_ENVIRONMENT = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}

# What the engine's own implementation of an exercise point raises in the grading copy.
NOT_AVAILABLE = Text(en="the engine's own {name} is not available while grading: write your own code",
                     zh="评分期间不能使用引擎自己的 {name}：请写你自己的代码")


def bwrap() -> str | None:
    """The bubblewrap executable, if installed."""
    return shutil.which("bwrap")


@functools.cache
def available() -> bool:
    """Whether bubblewrap is installed and can make its namespaces here (a container may forbid them), started
    as a slot's user id where the grader is root, as every worker is."""
    if bwrap() is None:
        return False
    slot = confinement.Slot() if confinement.uid_drop() else None
    user = {} if slot is None else {"user": slot.uid, "group": slot.uid, "extra_groups": []}
    try:
        return subprocess.run([*_walls(), "--", "/bin/true"], capture_output=True, timeout=30,
                              env=BWRAP_ENVIRONMENT, **user).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        if slot is not None:
            confinement.end_user(slot.uid)
            slot.release()


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
    # /dev is a tmpfs as large as the host's /dev/shm: a small /dev/shm of its own, then /dev made read-only.
    return [bwrap() or "bwrap", "--size", str(TMPFS_BYTES), "--tmpfs", "/tmp", *_read_only_binds(),
            "--size", str(TMPFS_BYTES), "--tmpfs", INSIDE_HOME, "--proc", "/proc",
            "--dev", "/dev", "--size", str(TMPFS_BYTES), "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
            "--unshare-all", "--die-with-parent", "--new-session",
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
