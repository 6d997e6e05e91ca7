"""The planner's searches, run here or on Ray, with a progress bar over every probe
and a log that lets a stopped search resume.

``run_searches`` runs ``plan/probes.py``'s rate search for every candidate. Each probe is one task: in this
process (``use_ray=False``), or a Ray task (the default): on a local Ray started in this process when no
``address`` is given (``ray.init``: one worker per core of this machine), else on the cluster at ``address``
(``ray start --head`` prints it). A candidate's next probe is sent as soon as its last one is back, so every
core stays busy while searches of different lengths finish. A probe's rate depends only on the probes of its
own candidate before it (``next_rate``, ``plan/rates.py``), so the answer is the same whichever worker ran which probe and in
what order: the Ray run and the serial one give the same results, byte for byte.

Every probe is appended to the log (``log_path``, JSON lines) as it comes back; its first line is the search's
own settings. Run again with the same settings and log, a search starts from the probes logged (a log of other
settings is refused, naming the difference), so a stopped search loses at most the probes under way.

Emits no events.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from tqdm.auto import tqdm

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.plan.messages import (LOCAL_RAY_DID_NOT_START, LOG_NOT_A_PLAN, LOG_NOT_A_PROBE, LOG_OTHER_SETTINGS,
                                          RAY_CLUSTER_DID_NOT_START)
from nanovllm_teach.plan.probes import Candidate, Objective, PlanWorkload, Probe, probe
from nanovllm_teach.plan.rates import next_rate

# The progress bar's words, in the learner's language (tqdm prints "done/total [elapsed<left, time/unit]").
PROBES = Text(en="probes", zh="探测")
PROBE_UNIT = Text(en="probe", zh="次")


def search_settings(workload: PlanWorkload, objective: Objective, steps: int) -> dict[str, Any]:
    """What a log's first line records, as its JSON reads back (a recorded workload's tuples as lists): probes
    logged under other settings measure something else."""
    return json.loads(json.dumps({"workload": asdict(workload), "objective": asdict(objective), "steps": steps}))


def read_log(log_path: Path, settings: dict[str, Any]) -> dict[str, list[Probe]]:
    """The probes a log holds, by candidate key (nothing if there is no log yet)."""
    if not log_path.exists() or log_path.stat().st_size == 0:
        return {}
    done: dict[str, list[Probe]] = {}
    with log_path.open(encoding="utf-8") as lines:
        try:
            header = json.loads(next(lines))
        except (ValueError, StopIteration):
            raise ValueError(say(LOG_NOT_A_PLAN, path=log_path)) from None
        if header.get("settings") != settings:
            theirs = header.get("settings") or {}
            differ = sorted(k for k in settings if theirs.get(k) != settings[k]) or ["all"]
            raise ValueError(say(LOG_OTHER_SETTINGS, path=log_path, differ=", ".join(differ)))
        for number, line in enumerate(lines, start=2):
            if not line.endswith("\n"):
                break  # the last line of a search stopped while writing it: that probe runs again
            try:
                entry = json.loads(line)
                done.setdefault(entry["candidate"], []).append(Probe(**entry["probe"]))
            except (ValueError, KeyError, TypeError):
                raise ValueError(say(LOG_NOT_A_PROBE, path=log_path, number=number)) from None
    return done


def run_searches(candidates: list[Candidate], workload: PlanWorkload, objective: Objective, steps: int, *,
                 log_path: Path, use_ray: bool = True, address: str | None = None,
                 progress: bool = True) -> dict[Candidate, list[Probe]]:
    """Every candidate's probes, in the order its search asked for them."""
    settings = search_settings(workload, objective, steps)
    logged = read_log(log_path, settings)
    histories = {c: logged.get(c.key, [])[:steps + 1] for c in candidates}
    todo = sum(steps + 1 - len(h) for h in histories.values())
    with _ProbeLog(log_path, settings) as write, \
            tqdm(total=todo, unit=say(PROBE_UNIT), desc=say(PROBES), disable=not progress) as bar:
        def record(candidate: Candidate, result: Probe) -> None:
            histories[candidate].append(result)
            write(candidate, result)
            bar.update(1)

        if use_ray:
            _on_ray(histories, workload, objective, steps, address, record)
        else:
            for candidate, history in histories.items():
                while (rate := next_rate(history, steps)) is not False:
                    record(candidate, probe(candidate, workload, objective, rate))
    return histories


class _ProbeLog:
    """The log, opened for appending (its settings first, when it is new); as a context, a ``write(candidate,
    probe)`` that flushes each line."""

    def __init__(self, path: Path, settings: dict[str, Any]) -> None:
        self.path, self.settings = path, settings

    def __enter__(self) -> Callable[[Candidate, Probe], None]:
        new = not self.path.exists() or self.path.stat().st_size == 0
        self.file = self.path.open("a", encoding="utf-8")
        if new:
            self.file.write(json.dumps({"settings": self.settings}) + "\n")
            self.file.flush()

        def write(candidate: Candidate, result: Probe) -> None:
            self.file.write(json.dumps({"candidate": candidate.key, "probe": result.to_dict()}) + "\n")
            self.file.flush()

        return write

    def __exit__(self, *exc: object) -> None:
        self.file.close()


def _on_ray(histories: dict[Candidate, list[Probe]], workload: PlanWorkload, objective: Objective, steps: int,
            address: str | None, record: Callable[[Candidate, Probe], None]) -> None:
    import ray  # only a Ray search needs it: it takes seconds to import

    started = not ray.is_initialized()
    if started:
        try:
            # No dashboard, no worker logs on this terminal: the progress bar is the search's only output.
            ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
        except Exception as error:  # Ray raises a bare Exception when its processes time out at start-up
            why = str(error).splitlines()[0] if str(error) else repr(error)
            raise ValueError(say(RAY_CLUSTER_DID_NOT_START, address=address, why=why) if address
                             else say(LOCAL_RAY_DID_NOT_START, why=why)) from None
    remote_probe = ray.remote(num_cpus=1, max_retries=0)(probe)
    pending: dict[Any, Candidate] = {}

    def send(candidate: Candidate) -> None:
        rate = next_rate(histories[candidate], steps)
        if rate is not False:
            pending[remote_probe.remote(candidate, workload, objective, rate)] = candidate

    try:
        for candidate in histories:
            send(candidate)
        while pending:
            [ready], _ = ray.wait(list(pending), num_returns=1)
            candidate = pending.pop(ready)
            record(candidate, ray.get(ready))
            send(candidate)
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        if started:
            ray.shutdown()
