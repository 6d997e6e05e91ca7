"""The host's side of the sandbox: what one worker may use, its own user id, its cgroup, and the end of it.

Role: grading, the sandbox's walls (``isolation`` builds bubblewrap's command inside them). Emits no events.

Run as root, the grader gives each worker a host user id of its own (``Slot``), so that per-user limits bind
(they never do for root) and ``end_user`` can kill every process of it at once, a fork bomb's and a
double-forked daemon's included. Where a cgroup can be made, ``Cgroup`` bounds the whole sandbox together.
``Confined`` is one worker's run: ``start`` holds the command at a gate until it is in the cgroup, so that not
one instruction of it runs outside; ``end`` undoes all of it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nanovllm_teach.i18n import Text, say

FIRST_UID = 60000
SLOTS = 64
_LOCKS = Path(tempfile.gettempdir()) / "nanovllm_teach_slots"
CGROUP_ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids", "cpu")
_CPU_PERIOD_US = 100_000
# How long a finished worker's processes may take to die, and its cgroup to empty, before the grade errs.
END_LIMIT_S = 5.0
# The gate: the command waits for one byte on stdin (the parent's go), then runs with stdin from /dev/null.
_GATE = ["/bin/sh", "-c", 'read -r _ && exec "$@" </dev/null', "gate"]

# Said to the teacher when the job slots or their end go wrong on the machine that grades.
LOCKS_NOT_OURS = Text(en="{path} belongs to another user: remove it", zh="{path} 属于另一个用户：请删除它")
NO_FREE_SLOT = Text(en="all {slots} job slots (user ids {first}-{last}) are in use",
                    zh="全部 {slots} 个作业槽位（用户 id {first}-{last}）都在使用中")
PROCESSES_OUTLIVED = Text(en="processes {pids} of user id {uid} outlived the grade",
                          zh="用户 id {uid} 的进程 {pids} 在评分结束后仍未退出")
CGROUP_NOT_REMOVED = Text(en="cannot remove the sandbox's cgroup {path}: {why}", zh="无法删除沙箱的 cgroup {path}：{why}")


@dataclass(frozen=True)
class Limits:
    """What one worker may use: rlimits, which the worker sets itself (``processes`` counts its user's), and
    for the whole sandbox, in a cgroup where one can be made, ``memory``, ``processes`` and ``cpus``."""

    address_space: int = 1 << 30  # enough to import torch (the cheat that calls the engine does), no more
    cpu_s: int = 60
    file_size: int = 1 << 20
    processes: int = 16
    open_files: int = 64
    memory: int = 1 << 30
    cpus: float = 1.0

    def argument(self) -> str:
        """The rlimits as the worker's command line carries them (``worker.set_limits``)."""
        return f"{self.address_space},{self.cpu_s},{self.file_size},{self.processes},{self.open_files}"


LIMITS = Limits()


class Slot:
    """A job slot's user id, ``FIRST_UID`` + its number, held with a lock file until ``release`` so that two
    graders on one machine never share one; an id that has an account is skipped."""

    def __init__(self) -> None:
        _LOCKS.mkdir(mode=0o700, exist_ok=True)
        if _LOCKS.stat().st_uid != os.geteuid():  # made by someone else on a shared /tmp: not ours to trust
            raise RuntimeError(say(LOCKS_NOT_OURS, path=_LOCKS))
        accounts = {entry.pw_uid for entry in pwd.getpwall()}
        for number in range(SLOTS):
            uid = FIRST_UID + number
            if uid in accounts:
                continue
            lock = os.open(_LOCKS / f"slot-{number}", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(lock)
                continue
            self.uid, self._lock = uid, lock
            end_user(uid)  # whatever a grader that crashed left running
            return
        raise RuntimeError(say(NO_FREE_SLOT, slots=SLOTS, first=FIRST_UID, last=FIRST_UID + SLOTS - 1))

    def release(self) -> None:
        os.close(self._lock)


def processes_of(uid: int) -> list[int]:
    """The processes running as ``uid`` (real or effective), zombies left out: they run nothing."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            status = Path(entry.path, "status").read_text()
        except OSError:  # ended while we looked
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if uid in [int(u) for u in fields["Uid"].split()[:2]] and fields["State"].split()[0] not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def end_user(uid: int) -> None:
    """Kill every process of ``uid`` and wait until none is left."""
    deadline = time.monotonic() + END_LIMIT_S
    while left := processes_of(uid):
        if time.monotonic() > deadline:
            raise RuntimeError(say(PROCESSES_OUTLIVED, pids=left[:5], uid=uid))
        # kill(-1) as that user: the kernel signals all its processes at once (the shell itself is spared), so a
        # fork bomb cannot outrun it.
        subprocess.run([*_GATE[:2], "kill -KILL -1"], user=uid, group=uid, extra_groups=[], env={},
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.01)


class Cgroup:
    """One sandbox's cgroup, made beside this process's own: a folder per controller (v1) or one folder (v2)."""

    # Swap is counted against the memory limit where the kernel accounts it: these files exist only there.
    WHERE_ACCOUNTED = ("memory.swap.max", "memory.memsw.limit_in_bytes")

    def __init__(self, folders: list[Path], version: int) -> None:
        self.folders, self.version = folders, version

    @staticmethod
    def _own() -> dict[str, str]:
        """This process's cgroup per controller ("" for v2's unified one)."""
        own = {}
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            own.update((c, path.lstrip("/")) for c in (controllers.split(",") if controllers else [""]))
        return own

    @classmethod
    def make(cls, limits: Limits, name: str) -> Cgroup | None:
        """A new cgroup with ``limits`` written in it; None where this machine gives none (no writable
        controllers, v2 without them delegated)."""
        own = cls._own()
        quota = int(limits.cpus * _CPU_PERIOD_US)
        cgroup = cls([], 2 if (CGROUP_ROOT / "cgroup.controllers").exists() else 1)
        try:
            if cgroup.version == 2:
                parent = CGROUP_ROOT / own.get("", "")
                enabled = (parent / "cgroup.subtree_control").read_text().split()
                missing = [c for c in CONTROLLERS if c not in enabled]
                if missing:  # fails (EBUSY) where the parent holds processes itself: not delegated, no cgroup
                    (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in missing))
                settings = {parent / name: {"memory.max": limits.memory, "memory.swap.max": 0,
                                            "pids.max": limits.processes, "cpu.max": f"{quota} {_CPU_PERIOD_US}"}}
            elif all(c in own and (CGROUP_ROOT / c / "cgroup.procs").exists() for c in CONTROLLERS):
                memory, pids, cpu = (CGROUP_ROOT / c / own[c] / name for c in CONTROLLERS)
                settings = {memory: {"memory.limit_in_bytes": limits.memory,
                                     "memory.memsw.limit_in_bytes": limits.memory},
                            pids: {"pids.max": limits.processes},
                            cpu: {"cpu.cfs_period_us": _CPU_PERIOD_US, "cpu.cfs_quota_us": quota}}
            else:
                return None
            for folder in settings:  # every folder first: one a controller refuses makes no limit written
                folder.mkdir()
                cgroup.folders.append(folder)
            for folder, values in settings.items():
                for file, value in values.items():
                    if file not in cls.WHERE_ACCOUNTED or (folder / file).exists():
                        (folder / file).write_text(str(value))
            return cgroup
        except OSError:  # what was made goes: a controller may refuse after another has said yes
            cgroup.remove()
        return None

    def add(self, pid: int) -> None:
        for folder in self.folders:
            (folder / "cgroup.procs").write_text(str(pid))

    def remove(self) -> None:
        """Remove the folders, their processes ended first."""
        deadline = time.monotonic() + END_LIMIT_S
        for folder in self.folders:
            while folder.exists():
                try:
                    folder.rmdir()
                except OSError as error:  # EBUSY while its last processes go
                    if error.errno not in (errno.EBUSY, errno.ENOENT) or time.monotonic() > deadline:
                        raise RuntimeError(say(CGROUP_NOT_REMOVED, path=folder, why=error)) from None
                    time.sleep(0.01)


class Confined:
    """One worker's run on the host: a copy of the ``submission`` that its user can read; with ``uid_drop``, a
    slot's user id and a cgroup where one can be made."""

    def __init__(self, submission: Path, tag: str, uid_drop: bool, limits: Limits = LIMITS) -> None:
        self._copy = tempfile.TemporaryDirectory(prefix="nanovllm_teach_submission_", ignore_cleanup_errors=True)
        self._ended = False
        self.slot: Slot | None = None
        self.cgroup: Cgroup | None = None
        try:
            self.slot = Slot() if uid_drop else None
            self.submission = Path(self._copy.name, submission.name)
            shutil.copyfile(submission, self.submission)
            self.submission.chmod(0o444)
            Path(self._copy.name).chmod(0o555)  # readable by the slot's user, who reads it inside the sandbox
            self.cgroup = Cgroup.make(limits, tag) if self.slot is not None else None
        except BaseException:
            self.end(None)
            raise

    def start(self, command: list[str], **popen: Any) -> subprocess.Popen:
        """``command`` (which drops to the slot's user itself), in the cgroup before it runs."""
        gate_r, gate_w = os.pipe()
        try:
            process = subprocess.Popen([*_GATE, *command], stdin=gate_r, start_new_session=True, **popen)
        finally:
            os.close(gate_r)
        try:
            if self.cgroup is not None:
                self.cgroup.add(process.pid)
            os.write(gate_w, b"\n")
        except BaseException:
            process.kill()
            process.wait()
            raise
        finally:
            os.close(gate_w)
        return process

    def end(self, process: subprocess.Popen | None) -> None:
        """Kill ``process`` and all it started, and undo the rest; once: a second call does nothing."""
        if self._ended:
            return
        self._ended = True
        try:
            if process is not None:
                # A session of its own: bubblewrap's namespace dies with it, a plain worker goes as a group.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            if self.slot is not None:
                end_user(self.slot.uid)
            if self.cgroup is not None:
                self.cgroup.remove()
        finally:
            if self.slot is not None:
                self.slot.release()
            self._copy.cleanup()
