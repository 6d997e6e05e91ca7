"""The sandbox a learner's file runs in: bubblewrap (Debian's ``bubblewrap``, what Flatpak builds on).

Role: grading, the sandbox's walls. Emits no events.

``launch`` starts one sandboxed process (a submission's ``worker``, a chapter's check). Inside bubblewrap:

- the interpreter, its libraries and the grading copy of the package are read-only; nothing else of the
  machine is there (no ``/etc``, no home, no repository, no other learner's folder, no kernel cache);
- ``/tmp``, ``HOME`` and ``/dev/shm`` are private in-memory folders of ``TMPFS_BYTES`` each, the only places
  it can write (``/dev`` itself is read-only);
- no network, its own PID namespace: when the worker's bubblewrap is killed, every process it started dies
  with it, a ``setsid`` grandchild included (``--die-with-parent``);
- no capabilities, a new session (no terminal to inject keystrokes into);
- nothing of the grader's environment: bubblewrap itself starts with an empty one (``env -i``: it is pid 1
  inside), the learner's process with ``--clearenv`` and the three variables it needs;
- the worker itself sets limits on address space, CPU seconds, file size, processes and open files
  (``confinement.Limits``) before the learner's file is loaded.

Who the learner's code runs as depends on who grades. Not root: bubblewrap runs unprivileged in a user
namespace of its own, the learner as user 65534 inside it (the grader's own user outside). Root (a teacher's
container, Gradescope, CI): bubblewrap runs as root with no user namespace (in one, its user would be root
outside, and no per-user limit binds root), so that root makes its binds, and an interpreter under a folder
only root may enter (pyenv's under ``/root``) is reachable through the folders made for it; then, before
anything of the worker runs, ``setpriv`` (util-linux) drops to the job slot's own host user id
(``confinement.Slot``) with no capabilities left: its rlimits bind, its cgroup bounds the whole sandbox
(bubblewrap included), every process of it is killed at the end, and bubblewrap's ``/proc/1/environ`` (root's)
is closed to it. ``uid_drop()`` says whether that drop works here, tried as a worker starts.

``grading_root()`` is the package as graded: a copy of its Python files in a temporary folder, without the
reference solutions, in which the exercise's points (the engine's own implementation a learner rewrites)
raise "not available while grading". Without bubblewrap (``available()`` is False: macOS, a machine
without it, a container that forbids its namespaces), the worker still runs on that copy, in a process of
its own with the same limits (dropped to the slot's user id where the grader is root), and the verdict says
it was not isolated.
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from nanovllm_teach.exercises import confinement
from nanovllm_teach.exercises.base import SOLUTION_FILE, visible
from nanovllm_teach.i18n import Text, resolve_lang, say

PACKAGE = Path(__file__).resolve().parents[1]
INSIDE_ROOT = "/grader"  # where the grading copy of the package is seen inside the sandbox
INSIDE_HOME = "/home/learner"
INSIDE_SUBMISSION = "/submission"
SANDBOX_UID = 65534  # nobody, inside the user namespace of a grader that is not root
TMPFS_BYTES = 16 << 20
# What the grader starts a worker's command with (the gate's shell, a plain worker): not the grader's own
# environment (a teacher's token). bubblewrap itself then starts with none at all (``env -i``): it is pid 1
# inside, and a sandbox user that is its own (a grader that is not root) can read its /proc/1/environ.
LAUNCH_ENVIRONMENT = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
# The namespaces of a bubblewrap started by root: all but the user namespace (``--unshare-all`` adds one).
ROOT_NAMESPACES = ("--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try")
# What setpriv needs to drop to the slot's user id, kept only until its exec clears them all. Nothing more:
# setpriv execs the interpreter with what it still holds, so with CAP_DAC_OVERRIDE it would start one that the
# slot's user cannot reach, which then cannot read its own standard library (it may take another Python's from
# /usr/lib instead), and the probe (``uid_drop_missing``) would pass where the worker's imports go wrong.
DROP_CAPABILITIES = ("CAP_SETUID", "CAP_SETGID")

NOT_ROOT = Text(en="the grader is not root", zh="评分器不是以 root 运行")
NO_SETPRIV = Text(en="setpriv is not installed (Debian/Ubuntu: apt-get install util-linux)",
                  zh="没有安装 setpriv（Debian/Ubuntu：apt-get install util-linux）")
DROP_FAILS = Text(en="a probe dropped to a slot's user id ({uid} + slot) by setpriv failed: {error}",
                  zh="经 setpriv 切换到槽位用户 id（{uid} + 槽位）的探测程序没有通过：{error}")
RAN_AS = Text(en="it ran as user id {uid}, not {slot_uid}", zh="它以用户 id {uid} 运行，而不是 {slot_uid}")
OTHER_PYTHON = Text(en="it ran on the Python of {prefix} (standard library {stdlib}), not on the grader's own "
                       "{own_prefix} ({own_stdlib})",
                    zh="它运行在 {prefix} 的 Python 上（标准库 {stdlib}），而不是评分器自己的 {own_prefix}（{own_stdlib}）")

# What the engine's own implementation of an exercise point raises in the grading copy.
NOT_AVAILABLE = Text(en="the engine's own {name} is not available while grading: write your own code",
                     zh="评分期间不能使用引擎自己的 {name}：请写你自己的代码")


def bwrap() -> str | None:
    """The bubblewrap executable, if installed."""
    return shutil.which("bwrap")


def setpriv() -> str | None:
    """util-linux's setpriv, which drops a root worker to its slot's user id, if installed."""
    return shutil.which("setpriv")


@functools.cache
def available() -> bool:
    """Whether bubblewrap is installed and can make its namespaces here (a container may forbid them)."""
    if bwrap() is None:
        return False
    try:
        return subprocess.run(["env", "-i", *_walls(None), "--", "/bin/true"], capture_output=True, timeout=30,
                              env=LAUNCH_ENVIRONMENT).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


# Run by ``_drop_fails`` as a worker is started: it prints the user id it runs as and the Python it runs on. An
# interpreter the dropped user id cannot fully read starts anyway, on another Python's standard library (Debian's
# under /usr), and the worker's imports then go wrong for every submission: the user id alone proves nothing.
_DROP_PROBE = "import json, os, sys; print(json.dumps([os.getuid(), sys.prefix, os.path.dirname(os.__file__)]))"


def own_python() -> list[str]:
    """This interpreter's prefix and standard library folder, which a worker's must match."""
    return [sys.prefix, os.path.dirname(os.__file__)]


@functools.cache
def _drop_fails(isolated: bool) -> str | None:
    """What went wrong when this interpreter was started exactly as a worker is (in bubblewrap where
    ``isolated``, then dropped by setpriv to a slot's user id) and asked for its user id and its Python; None:
    it ran as that user id, on the grader's own Python."""
    slot = confinement.Slot()
    try:
        done = subprocess.run(sandboxed_command([sys.executable, "-E", "-s", "-c", _DROP_PROBE], isolated, slot.uid),
                              capture_output=True, timeout=60, env=LAUNCH_ENVIRONMENT)
    except (OSError, subprocess.TimeoutExpired) as failure:
        return str(failure)
    finally:
        confinement.end_user(slot.uid)
        slot.release()
    try:
        uid, *python = json.loads(done.stdout)
    except (ValueError, TypeError):  # it printed nothing to read: what it said on stderr is why
        return visible(done.stderr.decode(errors="replace").strip()[-200:] or f"exit {done.returncode}")
    if uid != slot.uid:
        return say(RAN_AS, uid=uid, slot_uid=slot.uid)
    own = own_python()
    if python != own:
        return say(OTHER_PYTHON, prefix=python[0], stdlib=python[1], own_prefix=own[0], own_stdlib=own[1])
    return None


def uid_drop_missing() -> str | None:
    """Why a worker cannot run as its slot's own host user id here (in the learner's language), or None where
    it can: the grader is root on Linux, setpriv is installed, and a probe started as a worker is runs as that
    user id."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return say(NOT_ROOT)
    if setpriv() is None:
        return say(NO_SETPRIV)
    error = _drop_fails(available())
    return None if error is None else say(DROP_FAILS, uid=confinement.FIRST_UID, error=error)


def uid_drop() -> bool:
    """Whether each worker runs as its slot's own host user id here (``uid_drop_missing`` says why not)."""
    return uid_drop_missing() is None


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
    args: list[str] = []
    made = {"/", "/tmp"}
    for path in kept:
        # bubblewrap makes a bind's missing parents 0700; made first with --dir they are 0755, so that a user id
        # dropped to inside (not the folders' owner) can walk to an interpreter under /root.
        for parent in reversed(Path(path).parents):
            if str(parent) not in made:
                made.add(str(parent))
                args += ["--dir", str(parent)]
        args += ["--ro-bind", path, path]
    for link in ("/bin", "/lib", "/lib64", "/sbin"):
        if os.path.islink(link):
            args += ["--symlink", os.readlink(link), link]
        elif os.path.isdir(link):
            args += ["--ro-bind", link, link]
    return args


def _walls(uid: int | None) -> list[str]:
    """bubblewrap's options up to the command; ``uid``: the slot's user id setpriv drops to inside (root only)."""
    if os.geteuid() == 0:
        namespaces = [*ROOT_NAMESPACES]
        kept = [] if uid is None else [a for c in DROP_CAPABILITIES for a in ("--cap-add", c)]
    else:
        namespaces, kept = ["--unshare-all", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)], []
    # The private /tmp first: bubblewrap mounts in order, and an interpreter or a virtual environment that lives
    # under /tmp (a CI runner's clone) is then bound on top of it instead of hidden under it.
    # /dev is a tmpfs as large as the host's /dev/shm: a small /dev/shm of its own, then /dev made read-only.
    # The writable folders are 1777: root makes them, the slot's user id writes them.
    return [bwrap() or "bwrap", "--size", str(TMPFS_BYTES), "--perms", "1777", "--tmpfs", "/tmp", *_read_only_binds(),
            "--size", str(TMPFS_BYTES), "--perms", "1777", "--tmpfs", INSIDE_HOME, "--proc", "/proc", "--dev", "/dev",
            "--size", str(TMPFS_BYTES), "--perms", "1777", "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
            *namespaces, "--die-with-parent", "--new-session", "--cap-drop", "ALL", *kept,
            "--clearenv", "--setenv", "HOME", INSIDE_HOME, "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
            "--setenv", "LANG", "C.UTF-8", "--chdir", INSIDE_HOME]


def sandboxed_command(program: list[str], isolated: bool, uid: int | None, binds: tuple[str, ...] = ()) -> list[str]:
    """``program`` in bubblewrap where ``isolated`` (with ``binds`` besides the interpreter's), dropped by setpriv
    to ``uid`` (a slot's user id, where the grader is root) before it runs."""
    drop = [] if uid is None else [setpriv() or "setpriv", "--reuid", str(uid), "--regid", str(uid), "--clear-groups",
                                   "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    return ["env", "-i", *_walls(uid), *binds, "--", *drop, *program] if isolated else [*drop, *program]


def launch(confined: confinement.Confined, isolated: bool, script: str, points: tuple[str, ...],
           files: tuple[tuple[str, Path], ...], arguments: list[str], fds: tuple[int, int],
           output: Any) -> subprocess.Popen:
    """Start ``script`` (a path in the package) of the grading copy where ``points`` raise, as ``confined``'s
    process: in bubblewrap where ``isolated``, as the slot's user id where it has one, on ``fds``, printing to
    ``output``. Its arguments: the copy's root and each of ``files`` (a path inside, the host's file, bound
    read-only there) as it sees them, then ``arguments``. A submission's worker and a chapter's check
    (``track/sandbox.py``) both start so."""
    root = grading_root(resolve_lang(), points)
    if isolated:
        seen = [INSIDE_ROOT, *(inside for inside, _ in files)]
        binds = ["--ro-bind", str(root), INSIDE_ROOT, "--dir", INSIDE_SUBMISSION]  # 0755: see _read_only_binds
        for inside, host in files:
            binds += ["--ro-bind", str(host), inside]
    else:
        seen, binds = [str(root), *(str(host) for _, host in files)], []
    program = [sys.executable, "-E", "-s", "-u", f"{seen[0]}/nanovllm_teach/{script}", *seen, *arguments]
    uid = None if confined.slot is None else confined.slot.uid
    # The grader's environment stays out: only a learner's own self-check, as that learner, keeps it.
    plain = not isolated and uid is None
    return confined.start(sandboxed_command(program, isolated, uid, tuple(binds)), stdout=output,
                          stderr=subprocess.STDOUT, pass_fds=fds, env=None if plain else LAUNCH_ENVIRONMENT)
