"""The reference traces: each graded workload run on the untouched engine, recorded once per process.

The reference must be the engine as shipped, whatever a solution or a notebook cell has patched. Where it
is recorded:

- in this very process, if the engine here is the one on disk (``provenance``: no engine function,
  class or method replaced): ``nanovllm-teach grade``, a test, a notebook that patched nothing. It saves a
  second interpreter's start-up (importing torch and transformers: seconds on a busy machine), and it
  happens before the student's code is forked off, so that code never shares a process with it;
- else in a fresh interpreter (``references.main``), which shares nothing with this process. It is started
  before the student's code runs, so the two proceed side by side, and it records *every* graded workload
  not known yet (``graded_workloads``; a fraction of a second each): one interpreter start-up, whichever
  exercise comes next. The workloads go to it pickled in a file of the grader's own (no student's data).

It is recorded on the learner's own machine, so that the few fields that depend on the machine's
arithmetic agree with the student's run. ``PendingReferences(workloads)`` starts the recording;
``.traces()`` waits for it.
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

from nanovllm_teach.exercises.provenance import replaced_definitions
from nanovllm_teach.exercises.workloads import GradedWorkload, record_graded
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.trace.reader import Trace, load_trace

# Recording every reference takes a few seconds; this is far more than it ever needs.
REFERENCE_LIMIT_S = 300

# Said if the untouched engine itself fails (no student's code runs there): a broken install, a bad model.
REFERENCE_FAILED = Text(en="the reference engine failed on workload {names}: {message}",
                        zh="参考引擎在工作负载 {names} 上运行失败：{message}")
NAME_SEPARATOR = Text(en=", ", zh="、")

_recorded: dict[tuple[str, str], Trace] = {}
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
WORKLOADS_FILE = "workloads.pickle"


def graded_workloads() -> dict[str, GradedWorkload]:
    """Every workload an exercise is graded on, by name, found in the exercises' folders."""
    from nanovllm_teach.exercises import EXERCISES  # not at import: the exercises' folders import this module

    # An exercise graded otherwise (the quiz, the shards) has no workloads of its own.
    return {w.name: w for exercise in EXERCISES.values() for w in getattr(exercise, "workloads", ())}


def _record_here(workloads: list[GradedWorkload], model: str) -> None:
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the model is tiny; and a child forked later must not inherit a thread pool
    try:
        with tempfile.TemporaryDirectory(prefix="nanovllm_teach_reference_") as folder:
            for workload in workloads:
                path = Path(folder) / f"{workload.name}.jsonl"
                try:
                    record_graded(workload, path, model or None)
                except Exception as error:
                    raise RuntimeError(say(REFERENCE_FAILED, names=workload.name, message=error)) from error
                _recorded[(workload.name, model)] = load_trace(path)
    finally:
        torch.set_num_threads(threads)


class PendingReferences:
    """The reference traces of ``workloads``: known already, recorded here (the engine here is the one on
    disk), or being recorded in a fresh interpreter (with every other graded workload not yet known)."""

    def __init__(self, workloads: tuple[GradedWorkload, ...], model: str | Path | None = None) -> None:
        self.model = str(model) if model is not None else ""
        self.names = [w.name for w in workloads]
        self._process = None
        self._folder = None
        if all((name, self.model) in _recorded for name in self.names):
            return
        if not replaced_definitions():
            _record_here([w for w in workloads if (w.name, self.model) not in _recorded], self.model)
            return
        wanted = {**graded_workloads(), **{w.name: w for w in workloads}}
        self._missing = [name for name in wanted if (name, self.model) not in _recorded]
        self._folder = tempfile.TemporaryDirectory(prefix="nanovllm_teach_reference_")
        with open(Path(self._folder.name) / WORKLOADS_FILE, "wb") as file:
            pickle.dump([wanted[name] for name in self._missing], file)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(_PACKAGE_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
        command = [sys.executable, "-c", "import sys; from nanovllm_teach.exercises.references import main; "
                   "sys.exit(main())", "--out", self._folder.name,
                   *(["--model", self.model] if self.model else [])]
        self._process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def cancel(self) -> None:
        """Stop a recording still running (the grading ended early); nothing once ``traces()`` has run."""
        if self._process is not None:
            process, self._process = self._process, None
            process.kill()
            process.wait()
            self._folder.cleanup()

    def traces(self) -> dict[str, Trace]:
        if self._process is not None:
            process, self._process = self._process, None
            try:
                _, err = process.communicate(timeout=REFERENCE_LIMIT_S)
                if process.returncode != 0:
                    tail = err.decode(errors="replace").strip().splitlines()[-1:] or ["(no message)"]
                    raise RuntimeError(say(REFERENCE_FAILED, names=say(NAME_SEPARATOR).join(self._missing),
                                           message=tail[0]))
                for name in self._missing:
                    _recorded[(name, self.model)] = load_trace(Path(self._folder.name) / f"{name}.jsonl")
            finally:
                if process.poll() is None:  # interrupted, or out of time: the recording stops too
                    process.kill()
                    process.wait()
                self._folder.cleanup()
        return {name: _recorded[(name, self.model)] for name in self.names}


def reference_trace(workload: GradedWorkload, model: str | Path | None = None) -> Trace:
    """The untouched engine's trace of ``workload`` (recorded once per process)."""
    return PendingReferences((workload,), model).traces()[workload.name]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="record reference traces of graded workloads")
    parser.add_argument("--out", required=True, help=f"folder holding {WORKLOADS_FILE}, for NAME.jsonl")
    parser.add_argument("--model", default=None)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)  # the model is tiny; the other core runs the student's code meanwhile
    with open(Path(args.out) / WORKLOADS_FILE, "rb") as file:
        workloads = pickle.load(file)
    for workload in workloads:
        record_graded(workload, Path(args.out) / f"{workload.name}.jsonl", args.model)
    return 0
