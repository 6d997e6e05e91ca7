"""The reference traces: each graded workload run on the untouched engine, recorded once per process, and how
any graded run is recorded (``record_graded``: the reference's and the student's alike).

Role: grading. Emits no events (the engine it runs emits its own).

The reference must be the engine as shipped, whatever a solution or a notebook cell has patched in this
process (``Scheduler.schedule_decode = mine``), or it would agree with the student by construction. So a fresh
interpreter of the shipped package (``main``) records it while the student's code runs, from workloads pickled
in a file of the grader's own. Only the grade command, which runs nothing of a learner's itself, records in its
own process (``recorded_here``) and saves an interpreter's start. Either runs on the learner's machine, so that
fields that depend on the machine's arithmetic agree with the student's run.
"""
from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from nanovllm_teach.exercises.base import NAME_SEPARATOR
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.runs import TimedWorkload, Workload, record_run
from nanovllm_teach.trace.reader import Trace, load_trace
from nanovllm_teach.trace.recorder import TraceRecorder

# Recording every reference takes a few seconds; this is far more than it ever needs.
REFERENCE_LIMIT_S = 300

# Said if the untouched engine itself fails (no student's code runs there): a broken install, a bad model.
REFERENCE_FAILED = Text(en="the reference engine failed on workload {names}: {message}",
                        zh="参考引擎在工作负载 {names} 上运行失败：{message}")

# A graded workload is either kind: steps on the shipped model (trace equality), or requests in time on the
# simulated engine (the scheduling policy, graded by its metrics).
GradedWorkload = Workload | TimedWorkload


def record_graded(workload: GradedWorkload, path: Path, model: str | Path | None = None,
                  max_steps: int | None = None) -> None:
    """Run ``workload`` on the engine as it is now, writing its whole trace to ``path``."""
    # Every event with every tensor value: slot mappings are what some exercises are about.
    recorder = TraceRecorder(path, keep_in_memory=False, detail_decode_steps=sys.maxsize,
                             detail_max_elements=sys.maxsize)
    if isinstance(workload, TimedWorkload):
        workload.record(recorder)  # simulated: the model is the workload's own shape
    else:
        record_run(workload, recorder, model, max_steps=max_steps)


_recorded: dict[tuple[str, str], Trace] = {}
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
WORKLOADS_FILE = "workloads.pickle"


def fresh_interpreter_environment() -> dict[str, str]:
    """The environment of a fresh interpreter that imports this very package (the one this process runs,
    wherever it lies), ahead of anything else on ``PYTHONPATH``."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(_PACKAGE_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}


_here = False  # set by ``recorded_here``


@contextmanager
def recorded_here() -> Iterator[None]:
    """The references are recorded in this process for the length of the block: for the grade command only,
    a process that runs no learner's code and patches nothing of the engine."""
    global _here
    _here = True
    try:
        yield
    finally:
        _here = False


def records_here() -> bool:
    """Whether this process records its references itself (inside ``recorded_here``)."""
    return _here


def _record(workloads: list[GradedWorkload], folder: Path, model: str | None) -> None:
    """Each of ``workloads`` recorded to ``folder/NAME.jsonl``, on one torch thread: the model is tiny, and the
    other core runs the student's code meanwhile."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for workload in workloads:
            record_graded(workload, folder / f"{workload.name}.jsonl", model)
    finally:
        torch.set_num_threads(threads)


def graded_workloads() -> dict[str, GradedWorkload]:
    """Every workload an exercise is graded on, by name, found in the exercises' folders."""
    from nanovllm_teach.exercises import EXERCISES  # not at import: the exercises' folders import this module

    # An exercise graded otherwise (the quiz, the shards) has no workloads of its own.
    return {w.name: w for exercise in EXERCISES.values() for w in getattr(exercise, "workloads", ())}


class PendingReferences:
    """The reference traces of ``workloads``: known already, recorded here (``recorded_here``), or being recorded
    in a fresh interpreter (with every other graded workload not yet known); ``traces()`` waits for them."""

    def __init__(self, workloads: tuple[GradedWorkload, ...], model: str | Path | None = None) -> None:
        self.model = str(model) if model is not None else ""
        self.names = [w.name for w in workloads]
        self._process = None
        self._folder = None
        if all((name, self.model) in _recorded for name in self.names):
            return
        if records_here():
            with tempfile.TemporaryDirectory(prefix="nanovllm_teach_reference_") as folder:
                missing = [w for w in workloads if (w.name, self.model) not in _recorded]
                try:
                    _record(missing, Path(folder), self.model or None)
                except Exception as error:
                    raise RuntimeError(say(REFERENCE_FAILED, names=say(NAME_SEPARATOR).join(w.name for w in missing),
                                           message=error)) from error
                for workload in missing:
                    _recorded[(workload.name, self.model)] = load_trace(Path(folder) / f"{workload.name}.jsonl")
            return
        # Every graded workload not known yet, not only these: the interpreter's start (torch, transformers,
        # the model) is most of its time, each workload a fraction of a second, so one start per process
        # covers every exercise graded after this one.
        wanted = {**graded_workloads(), **{w.name: w for w in workloads}}
        self._missing = [name for name in wanted if (name, self.model) not in _recorded]
        self._folder = tempfile.TemporaryDirectory(prefix="nanovllm_teach_reference_")
        with open(Path(self._folder.name) / WORKLOADS_FILE, "wb") as file:
            pickle.dump([wanted[name] for name in self._missing], file)
        command = [sys.executable, "-c", "import sys; from nanovllm_teach.exercises.references import main; "
                   "sys.exit(main())", "--out", self._folder.name,
                   *(["--model", self.model] if self.model else [])]
        self._process = subprocess.Popen(command, env=fresh_interpreter_environment(), stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE)

    def cancel(self) -> None:
        """Stop a recording still running (killing one that has ended does nothing) and remove its folder;
        nothing once ``traces()`` has run."""
        if self._process is not None:
            process, self._process = self._process, None
            process.kill()
            process.wait()
            self._folder.cleanup()

    def traces(self) -> dict[str, Trace]:
        """The traces of ``workloads`` by name, once the recording has ended (within ``REFERENCE_LIMIT_S``)."""
        if self._process is not None:
            try:
                _, err = self._process.communicate(timeout=REFERENCE_LIMIT_S)
                if self._process.returncode != 0:
                    tail = err.decode(errors="replace").strip().splitlines()[-1:] or ["(no message)"]
                    raise RuntimeError(say(REFERENCE_FAILED, names=say(NAME_SEPARATOR).join(self._missing),
                                           message=tail[0]))
                for name in self._missing:
                    _recorded[(name, self.model)] = load_trace(Path(self._folder.name) / f"{name}.jsonl")
            finally:
                self.cancel()  # interrupted, or out of time: the recording stops too
        return {name: _recorded[(name, self.model)] for name in self.names}


def reference_trace(workload: GradedWorkload, model: str | Path | None = None) -> Trace:
    """The untouched engine's trace of ``workload`` (recorded once per process)."""
    return PendingReferences((workload,), model).traces()[workload.name]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="record reference traces of graded workloads")
    parser.add_argument("--out", required=True, help=f"folder holding {WORKLOADS_FILE}, for NAME.jsonl")
    parser.add_argument("--model", default=None)
    args = parser.parse_args(argv)
    with open(Path(args.out) / WORKLOADS_FILE, "rb") as file:
        _record(pickle.load(file), Path(args.out), args.model)
    return 0
