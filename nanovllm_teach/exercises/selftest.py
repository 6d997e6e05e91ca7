"""What this machine gives the grading sandbox, found by running a probe in it (``grade --check-isolation``).

Role: grading (the teacher's side). Emits no events.

``check()`` starts a worker exactly as a submission's is started, on a probe file that reports what it sees
from inside; ``screen()`` is the one screen a teacher reads. Gradescope needs less than a class (``Check``):
its container may forbid bubblewrap's namespaces, and it grades one submission. Whether the worker runs as its
slot's user id and on the grader's own Python is the uid drop's own probe (``isolation.uid_drop_missing``): a
failure shows here as its reason.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nanovllm_teach.exercises import confinement, isolation
from nanovllm_teach.exercises.remote import RemoteFailure, Worker
from nanovllm_teach.i18n import Text, say

PROBE = '''
import os, resource


def probe():
    try:
        environment = sorted({item.split(b"=")[0].decode() for item in open("/proc/1/environ", "rb").read()
                              .split(b"\\0") if item})
    except OSError:
        environment = None  # not readable: another user's process
    with open("/proc/net/dev") as file:
        network = [line.split(":")[0].strip() for line in file.read().splitlines()[2:]]
    shm = os.statvfs("/dev/shm") if os.path.isdir("/dev/shm") else None
    return {"environment": environment, "network": network, "processes": resource.getrlimit(resource.RLIMIT_NPROC)[0],
            "dev_shm": shm.f_blocks * shm.f_frsize if shm else None}
'''

TITLE = Text(en="Grading isolation on this machine (nanovllm-teach grade --check-isolation):",
             zh="这台机器上的评分隔离（nanovllm-teach grade --check-isolation）：")
BWRAP_STARTS = Text(en="  bubblewrap:  {path}, starts; network unshared (inside: {network})",
                    zh="  bubblewrap：{path}，可以启动；网络已隔离（沙箱内：{network}）")
BWRAP_FAILS = Text(en="  bubblewrap:  {path}, but it cannot make its namespaces here (a container may forbid them)",
                   zh="  bubblewrap：{path}，但在这里建不了它的命名空间（容器可能禁止）")
BWRAP_MISSING = Text(en="  bubblewrap:  not installed (Debian/Ubuntu: apt-get install bubblewrap)",
                     zh="  bubblewrap：未安装（Debian/Ubuntu：apt-get install bubblewrap）")
UID_DROP = Text(en="  user id:     each submission runs as a host user id of its own ({first} + job slot); the probe "
                   "ran as {uid}, its processes limited to {processes}",
                zh="  用户 id：   每份作业以自己的宿主用户 id 运行（{first} + 作业槽位）；探测以 {uid} 运行，进程数上限 {processes}")
NO_UID_DROP = Text(en="  user id:     the grader's own ({uid}), no uid drop: {reason}; process limits do not bind "
                      "for root",
                   zh="  用户 id：   评分器自己的（{uid}），不能切换用户：{reason}；而 root 不受进程数限制")
# Not root: bubblewrap still isolates (its own user namespace), but there is no user id per submission to limit and end.
NOT_ROOT_USER = Text(en="  user id:     the grader's own ({uid}): not root, so no user id per submission. A learner's "
                        "self-check runs as this user (as {inside} inside bubblewrap, where it starts), its process "
                        "limit counting this user's other processes too; a class or Gradescope needs the grader run "
                        "as root",
                     zh="  用户 id：   评分器自己的（{uid}）：不是 root，所以不能每份作业一个用户 id。学习者的自查以这个用户"
                        "运行（能启动 bubblewrap 时，在其中是 {inside}），进程数上限也把这个用户的其他进程算在内；给全班"
                        "或在 Gradescope 上评分需要以 root 运行评分器")
CGROUP = Text(en="  cgroup:      {kind}, for the whole sandbox: {memory} MiB, {processes} tasks, {cpus} CPU",
              zh="  cgroup：    {kind}，针对整个沙箱：{memory} MiB、{processes} 个任务、{cpus} 个 CPU")
NO_CGROUP = Text(en="  cgroup:      none can be made here: only the per-process rlimits bound memory and CPU",
                 zh="  cgroup：    这里建不了：内存和 CPU 只受每个进程的 rlimit 限制")
RLIMITS = Text(en="  rlimits:     {address} MiB address space, {cpu} s CPU, {file} MiB per file, {processes} "
                  "processes, {files} open files",
               zh="  rlimits：   地址空间 {address} MiB、CPU {cpu} 秒、单个文件 {file} MiB、{processes} 个进程、"
                  "{files} 个打开的文件")
INSIDE = Text(en="  inside:      environment of pid 1: {environment}; /dev/shm: {shm}",
              zh="  沙箱内：    1 号进程的环境变量：{environment}；/dev/shm：{shm}")
CLOSED = Text(en="not readable by the submission's user id", zh="作业的用户 id 读不到")
PROBE_FAILED = Text(en="  probe:       the probe did not run in the sandbox: {error}",
                    zh="  探测：      探测程序没能在沙箱中运行：{error}")
CLASS_READY = Text(en="A class can be graded here: bubblewrap and a user id per submission{cgroup}.",
                   zh="这里可以给全班评分：bubblewrap 加每份作业一个用户 id{cgroup}。")
CLASS_NOT_READY = Text(en="A class cannot be graded here: it needs bubblewrap that starts and a user id per submission "
                          "(run the grader as root, e.g. in a container).",
                       zh="这里不能给全班评分：需要能启动的 bubblewrap，以及每份作业一个用户 id（以 root 运行评分器，例如在容器里）。")
WITH_CGROUP = Text(en=", in a cgroup", zh="，在 cgroup 中")
GRADESCOPE = Text(en="Gradescope (one submission): {answer}.", zh="Gradescope（一份作业）：{answer}。")
GRADESCOPE_YES = Text(en="graded with what is listed above", zh="用上面列出的隔离评分")
GRADESCOPE_NO = Text(en="refused: nothing isolates a submission here (no user id of its own, or the probe failed)",
                     zh="拒绝评分：这里没有任何东西能隔离作业（没有单独的用户 id，或探测失败）")


@dataclass(frozen=True)
class Check:
    """What the probe found; ``inside``: what it reported from the sandbox (empty, with ``error``, if it did not
    run)."""

    bwrap: str | None
    starts: bool
    uid_drop_missing: str | None
    root: bool
    uid: int
    cgroup: str | None
    inside: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def uid_drop(self) -> bool:
        return self.uid_drop_missing is None

    @property
    def class_ready(self) -> bool:
        return self.starts and self.uid_drop and not self.error

    @property
    def gradescope_ready(self) -> bool:
        return self.uid_drop and not self.error


def check() -> Check:
    inside: dict[str, Any] = {}
    error, cgroup, uid = None, None, os.getuid()
    with tempfile.TemporaryDirectory(prefix="nanovllm_teach_probe_") as folder:
        probe = Path(folder, "probe.py")
        probe.write_text(PROBE)
        try:
            with Worker(probe, ("probe",), (), 60.0) as worker:
                confined = worker.confined
                if confined and confined.cgroup:
                    cgroup = f"v{confined.cgroup.version}: " + ", ".join(confinement.CONTROLLERS)
                uid = confined.slot.uid if confined and confined.slot else uid
                error = worker.load()
                if error is None:
                    inside = worker.call("probe", (), ())
        except (RemoteFailure, RuntimeError, OSError) as failure:
            error = f"{type(failure).__name__}: {failure}"
    return Check(shutil.which("bwrap"), isolation.available(), isolation.uid_drop_missing(), os.geteuid() == 0, uid,
                 cgroup, inside, error)


def screen(found: Check) -> str:
    limits = confinement.LIMITS
    inside = found.inside
    lines = [say(TITLE)]
    if found.bwrap is None:
        lines.append(say(BWRAP_MISSING))
    elif found.starts:
        lines.append(say(BWRAP_STARTS, path=found.bwrap, network=", ".join(inside.get("network", [])) or "-"))
    else:
        lines.append(say(BWRAP_FAILS, path=found.bwrap))
    if found.uid_drop:
        lines.append(say(UID_DROP, first=confinement.FIRST_UID, uid=found.uid,
                         processes=inside.get("processes", "-")))
    elif not found.root:
        lines.append(say(NOT_ROOT_USER, uid=found.uid, inside=isolation.SANDBOX_UID))
    else:
        lines.append(say(NO_UID_DROP, uid=found.uid, reason=found.uid_drop_missing))
    lines.append(say(CGROUP, kind=found.cgroup, memory=limits.memory >> 20, processes=limits.processes,
                     cpus=f"{limits.cpus:g}") if found.cgroup else say(NO_CGROUP))
    lines.append(say(RLIMITS, address=limits.address_space >> 20, cpu=limits.cpu_s, file=limits.file_size >> 20,
                     processes=limits.processes, files=limits.open_files))
    if found.error:
        lines.append(say(PROBE_FAILED, error=found.error))
    else:
        environment = inside.get("environment")
        shm = inside.get("dev_shm")
        lines.append(say(INSIDE, environment=say(CLOSED) if environment is None else ", ".join(environment) or "-",
                         shm="-" if shm is None else f"{shm >> 20} MiB"))
    lines.append(say(CLASS_READY, cgroup=say(WITH_CGROUP) if found.cgroup else "") if found.class_ready
                 else say(CLASS_NOT_READY))
    lines.append(say(GRADESCOPE, answer=say(GRADESCOPE_YES if found.gradescope_ready else GRADESCOPE_NO)))
    return "\n".join(lines)
