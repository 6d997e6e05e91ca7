"""The sandbox a learner's file runs in: bubblewrap (Debian's ``bubblewrap``, what Flatpak builds on).

Role: grading, the sandbox's walls (docs/grading.md draws them). Emits no events.

``launch`` starts one sandboxed process (a submission's ``worker``, a chapter's check) on ``grading_root()``,
a copy of the package without the reference solutions where the exercise's points raise "not available while
grading". Run by root, bubblewrap has no user namespace (its user would be root outside, where no per-user
limit binds), and ``setpriv`` drops to the job slot's own user id (``confinement.Slot``) before anything of the
worker runs; ``uid_drop_missing()`` says why that does not work here (the interpreter, started as a worker is,
ran as another user id or on another Python), the one place either is checked. Without bubblewrap
(``available()`` False) the worker runs on the same copy in a plain process with the same limits, and the
verdict says it was not isolated.
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
INSIDE_ROOT = "/grader"  # the grading copy of the package, inside
INSIDE_HOME = "/home/learner"
INSIDE_SUBMISSION = "/submission"
SANDBOX_UID = 65534  # nobody, inside the user namespace of a grader that is not root
TMPFS_BYTES = 16 << 20
# A worker's command starts without the grader's environment (a teacher's token), and bubblewrap with none at
# all (``env -i``): it is pid 1 inside, and a sandbox user that is its own can read its /proc/1/environ.
LAUNCH_ENVIRONMENT = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
# The namespaces of a bubblewrap started by root: all but the user namespace (``--unshare-all`` adds one).
ROOT_NAMESPACES = ("--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try")
# What setpriv needs to drop to the slot's user id, until its exec clears them. Nothing more: with
# CAP_DAC_OVERRIDE it would exec an interpreter the slot's user cannot read, which then takes another Python's
# standard library, and the probe (``uid_drop_missing``) would pass where the worker's imports go wrong.
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

NOT_AVAILABLE = Text(en="the engine's own {name} is not available while grading: write your own code",
                     zh="评分期间不能使用引擎自己的 {name}：请写你自己的代码")


@functools.cache
def available() -> bool:
    """Whether bubblewrap is installed and can make its namespaces here (a container may forbid them)."""
    if shutil.which("bwrap") is None:
        return False
    try:
        return subprocess.run(["env", "-i", *_walls(None), "--", "/bin/true"], capture_output=True, timeout=30,
                              env=LAUNCH_ENVIRONMENT).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


# Not the user id alone: an interpreter the dropped user cannot fully read starts anyway, on another Python's
# standard library (Debian's under /usr), and every worker's imports then go wrong.
_DROP_PROBE = "import json, os, sys; print(json.dumps([os.getuid(), sys.prefix, os.path.dirname(os.__file__)]))"


@functools.cache
def _drop_fails(isolated: bool) -> str | None:
    """What went wrong when this interpreter, started exactly as a worker is, told its user id and its Python
    (None: the slot's, and the grader's own)."""
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
    own = [sys.prefix, os.path.dirname(os.__file__)]
    if python != own:
        return say(OTHER_PYTHON, prefix=python[0], stdlib=python[1], own_prefix=own[0], own_stdlib=own[1])
    return None


def uid_drop_missing() -> str | None:
    """Why a worker cannot run as its slot's own host user id here, or None where it can."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return say(NOT_ROOT)
    if shutil.which("setpriv") is None:
        return say(NO_SETPRIV)
    error = _drop_fails(available())
    return None if error is None else say(DROP_FAILS, uid=confinement.FIRST_UID, error=error)


def uid_drop() -> bool:
    return uid_drop_missing() is None


@functools.cache
def grading_root(lang: str, points: tuple[str, ...]) -> Path:
    """This process's copy of the package's Python files (made once, removed at exit), the folder first on the
    worker's ``sys.path``: no reference solutions, no model, and only the exercise's ``points`` raise, in
    ``lang`` (the rest of the engine is there to use: a learner's ``schedule_decode`` calls ``can_append``)."""
    copy = tempfile.TemporaryDirectory(prefix="nanovllm_teach_grading_root_", ignore_cleanup_errors=True)
    atexit.register(copy.cleanup)  # which undoes the read-only modes first
    folder = Path(copy.name)
    for source in PACKAGE.rglob("*.py"):
        relative = source.relative_to(PACKAGE)
        if "__pycache__" in relative.parts or (source.name == SOLUTION_FILE and relative.parts[0] == "exercises"):
            continue
        target = folder / "nanovllm_teach" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    for point in sorted(points):
        module, _, attribute = point.partition(":")
        stand_in = f"_graded_{attribute.replace('.', '_')}"
        message = say(NOT_AVAILABLE, lang, name=attribute.rpartition(".")[2])
        with folder.joinpath(*module.split(".")).with_suffix(".py").open("a", encoding="utf-8") as file:
            file.write(f"\n\ndef {stand_in}(*args, **kwargs):\n    raise RuntimeError({message!r})\n\n\n"
                       f"{attribute} = {stand_in}\n")
    for path in folder.rglob("*"):
        path.chmod(0o555 if path.is_dir() else 0o444)
    folder.chmod(0o555)
    return folder


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
    # The writable folders are 1777: root makes them, the slot's user id writes them. Its own PID namespace and
    # --die-with-parent: killing bubblewrap kills all it started, a setsid grandchild too; --new-session: no
    # terminal to push keystrokes into.
    private = ["--size", str(TMPFS_BYTES), "--perms", "1777", "--tmpfs"]
    return [shutil.which("bwrap") or "bwrap", *private, "/tmp", *_read_only_binds(), *private, INSIDE_HOME,
            "--proc", "/proc", "--dev", "/dev", *private, "/dev/shm", "--remount-ro", "/dev", *namespaces,
            "--die-with-parent", "--new-session", "--cap-drop", "ALL", *kept, "--clearenv", "--chdir", INSIDE_HOME,
            "--setenv", "HOME", INSIDE_HOME, "--setenv", "PYTHONDONTWRITEBYTECODE", "1", "--setenv", "LANG", "C.UTF-8"]


def sandboxed_command(program: list[str], isolated: bool, uid: int | None, binds: tuple[str, ...] = ()) -> list[str]:
    """``program`` in bubblewrap where ``isolated``, dropped by setpriv to ``uid`` (where the grader is root)."""
    drop = [] if uid is None else [shutil.which("setpriv") or "setpriv", "--reuid", str(uid), "--regid", str(uid),
                                   "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    return ["env", "-i", *_walls(uid), *binds, "--", *drop, *program] if isolated else [*drop, *program]


def launch(confined: confinement.Confined, isolated: bool, script: str, points: tuple[str, ...],
           files: tuple[tuple[str, Path], ...], arguments: list[str], fds: tuple[int, int],
           output: Any) -> subprocess.Popen:
    """Start ``script`` of the grading copy as ``confined``'s process. Its arguments: the copy's root and each of
    ``files`` (a path inside, the host's file, bound read-only there) as it sees them, then ``arguments``."""
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
