"""Execution layer: one rule for how many CPU threads torch uses and how its idle threads wait.

torch's CPU build runs its parallel regions on an OpenMP pool (GNU libgomp in the wheels of torch 2.x). By
default an idle libgomp thread *spins* for a while before it sleeps, so that the next parallel region starts
without a wake-up. That is the right bet on an idle machine and a disastrous one when another program keeps
a core busy: the spinning threads compete with it, and every region waits for whichever thread the
operating system descheduled. Measured on a 2-core machine with one core in a busy loop, 2 spinning threads
made the shipped model's decode about 9x slower than 1 thread; 2 passive threads ran as fast as 1.

The rule, applied once per engine at start-up (``apply_thread_rule``, from the model runner):

- **wait policy**: ``OMP_WAIT_POLICY=PASSIVE`` (idle threads sleep at once). libgomp reads it only when it
  is loaded, with torch, so ``prefer_passive_wait`` sets it when the engine's ``config.py`` is imported,
  before its ``import torch`` (importing the package alone changes nothing), unless the environment already
  says something or torch was imported first (then it cannot take effect, and the choice says so);
- **thread count**: the cores this process may run on (``os.sched_getaffinity``, and a cgroup CPU quota
  where there is one), less the cores other programs keep busy right now (read from ``/proc/stat`` over
  ``SAMPLE_SECONDS``), and no more than the model is worth: one thread per ``BYTES_PER_THREAD`` of weights
  a decode step reads, because waking a sleeping thread costs tens of microseconds and a tiny model's
  multiplies are over before it is awake. ``OMP_NUM_THREADS``, when set, is the user's choice and wins;
  the engine setting ``cpu_threads`` wins over everything.

The demo, the notebooks and the benchmarks all get it through the engine; none sets a thread count of its
own. Emits no events: the model runner reports the choice in TP_RUNTIME_INIT.
"""

from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# A decode step must read at least this many bytes of weights per thread to be worth splitting: at the
# ~10 GB/s one core reads, 32 MiB is ~3 ms of work, against the tens of microseconds a wake-up costs.
BYTES_PER_THREAD = 32 * 2**20
SAMPLE_SECONDS = 0.1  # how long the rule watches the cores to see which are busy
WAIT_POLICY = "PASSIVE"


def prefer_passive_wait() -> None:
    """Ask libgomp for sleeping idle threads, if torch is not loaded yet and nobody has said otherwise."""
    if "torch" not in sys.modules:
        os.environ.setdefault("OMP_WAIT_POLICY", WAIT_POLICY)


@dataclass(frozen=True)
class ThreadChoice:
    """How many threads the engine runs, and why (TP_RUNTIME_INIT's ``num_threads`` and ``threads_reason``)."""

    num_threads: int
    usable_cores: int
    busy_cores: int
    wait_policy: str  # what libgomp was given when torch loaded ("unset": it spins, its default)
    reason: str


def usable_cores() -> int:
    """Cores this process may run on: its CPU affinity, lowered by a cgroup v2 CPU quota if there is one."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
    except (OSError, ValueError):
        return cores
    return cores if quota == "max" else max(1, min(cores, math.floor(int(quota) / int(period))))


def _cpu_times() -> dict[str, tuple[int, int]]:
    """(busy, total) jiffies of each core from ``/proc/stat`` (empty where there is none)."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return {}
    times = {}
    for line in lines:
        name, *values = line.split()
        if name.startswith("cpu") and name != "cpu":
            ticks = [int(v) for v in values[:8]]
            idle = ticks[3] + ticks[4]  # idle + iowait
            times[name[3:]] = (sum(ticks) - idle, sum(ticks))
    return times


def busy_cores(seconds: float = SAMPLE_SECONDS) -> int:
    """How many of this process's cores other programs keep busy now: their busy share over ``seconds``,
    summed and rounded (this process sleeps meanwhile, so the share is theirs)."""
    allowed = {str(c) for c in os.sched_getaffinity(0)} if hasattr(os, "sched_getaffinity") else None
    before = _cpu_times()
    if not before:
        return 0
    time.sleep(seconds)
    after = _cpu_times()
    share = 0.0
    for core, (busy, total) in after.items():
        if core in before and (allowed is None or core in allowed) and total > before[core][1]:
            share += (busy - before[core][0]) / (total - before[core][1])
    return round(share)


def choose_threads(weight_bytes: int, ranks: int = 1, cores: int | None = None, busy: int | None = None,
                   env: dict[str, str] | None = None) -> ThreadChoice:
    """The rule for a model whose decode step reads ``weight_bytes`` of weights, one of ``ranks`` processes
    sharing the cores (tensor parallelism). ``cores``, ``busy``, ``env``: the machine's, unless given."""
    env = os.environ if env is None else env
    policy = env.get("OMP_WAIT_POLICY", "unset")
    cores = usable_cores() if cores is None else cores
    if env.get("OMP_NUM_THREADS", "").isdigit() and int(env["OMP_NUM_THREADS"]) > 0:
        return ThreadChoice(int(env["OMP_NUM_THREADS"]), cores, 0, policy, "OMP_NUM_THREADS")
    worth = max(1, weight_bytes // BYTES_PER_THREAD)
    if worth == 1:  # no need to watch the cores: one thread whatever they do
        return ThreadChoice(1, cores, 0, policy, f"model: under {BYTES_PER_THREAD >> 20} MiB of weights")
    busy = busy_cores() if busy is None else busy
    free = max(1, (cores - min(busy, cores - 1)) // ranks)
    if worth < free:
        reason = f"model: one thread per {BYTES_PER_THREAD >> 20} MiB of weights"
        return ThreadChoice(worth, cores, busy, policy, reason)
    reason = "free cores" if busy else "usable cores"
    return ThreadChoice(free, cores, busy, policy, reason + (f" / {ranks} ranks" if ranks > 1 else ""))


def apply_thread_rule(model: str | Path, ranks: int = 1, explicit: int | None = None) -> ThreadChoice:
    """Set torch's intra-op threads by the rule for the checkpoint folder ``model`` (its weights as stored,
    each of ``ranks`` holding its share), or to ``explicit`` (the ``cpu_threads`` setting)."""
    import torch

    if explicit is not None:
        choice = ThreadChoice(explicit, usable_cores(), 0, os.environ.get("OMP_WAIT_POLICY", "unset"), "cpu_threads")
    else:
        weight_bytes = sum(f.stat().st_size for f in Path(model).glob("*.safetensors"))
        choice = choose_threads(weight_bytes // ranks, ranks)
    torch.set_num_threads(choice.num_threads)
    return choice
