"""The reference traces: each graded workload run on the untouched engine, in a fresh Python process.

The reference runs in its own interpreter (``references.main``), started
before the student's code runs and sharing nothing with it: whatever a solution or a notebook cell has
patched, the reference is the engine as shipped. It is recorded on the learner's own machine, so that the
few fields that depend on the machine's arithmetic agree with the student's run. Each process records a
workload once and keeps the trace.

``PendingReferences(workloads)`` starts the recording and returns at once, so that the reference and
the student's run proceed side by side; ``.traces()`` waits for them.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from nanovllm_teach.exercises.workloads import GRADED, GradedWorkload, record_graded
from nanovllm_teach.trace.reader import Trace, load_trace

# The reference of a whole exercise takes a few seconds; this is far more than it ever needs.
REFERENCE_LIMIT_S = 300

_recorded: dict[tuple[str, str], Trace] = {}
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


class PendingReferences:
    """The reference traces of ``workloads``, being recorded in a child interpreter unless already known."""

    def __init__(self, workloads: tuple[GradedWorkload, ...], model: str | Path | None = None) -> None:
        self.model = str(model) if model is not None else ""
        self.names = [w.name for w in workloads]
        missing = [name for name in self.names if (name, self.model) not in _recorded]
        self._folder = tempfile.TemporaryDirectory(prefix="nanovllm_teach_reference_") if missing else None
        self._process = None
        if missing:
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                [str(_PACKAGE_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
            command = [sys.executable, "-c", "import sys; from nanovllm_teach.exercises.references import main; "
                       "sys.exit(main())", "--out", self._folder.name,
                       *(["--model", self.model] if self.model else []), *missing]
            self._process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self._missing = missing

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
                    raise RuntimeError(f"the reference engine failed on workloads {self._missing}: {tail[0]}")
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
    parser.add_argument("names", nargs="+", choices=sorted(GRADED))
    parser.add_argument("--out", required=True, help="folder for NAME.jsonl")
    parser.add_argument("--model", default=None)
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)  # the model is tiny; the other core runs the student's code meanwhile
    for name in args.names:
        record_graded(GRADED[name], Path(args.out) / f"{name}.jsonl", args.model)
    return 0

