"""The reference traces: each graded workload run on the untouched engine, recorded once per process.

Role: grading. Emits no events (the engine it runs emits its own).

The reference must be the engine as shipped, whatever a solution or a notebook cell has patched
(``Scheduler.schedule_decode = mine``): a reference recorded with it would agree with the student by
construction. So it is recorded in this process only if no engine function, class or method here differs
from what its source file defines (``replaced_definitions``); that saves a second interpreter's start-up,
and happens before the student's code is forked off. Else a fresh interpreter (``main``), started before the
student's code runs, records every graded workload not known yet; the workloads go to it pickled in a file
of the grader's own. It runs on the learner's machine, so that fields that depend on the machine's
arithmetic agree with the student's run.
"""

from __future__ import annotations

import argparse
import ast
import functools
import inspect
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from nanovllm_teach.exercises.messages import NAME_SEPARATOR
from nanovllm_teach.exercises.workloads import GradedWorkload, record_graded
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.trace.reader import Trace, load_trace

# Recording every reference takes a few seconds; this is far more than it ever needs.
REFERENCE_LIMIT_S = 300

# Said if the untouched engine itself fails (no student's code runs there): a broken install, a bad model.
REFERENCE_FAILED = Text(en="the reference engine failed on workload {names}: {message}",
                        zh="参考引擎在工作负载 {names} 上运行失败：{message}")

_recorded: dict[tuple[str, str], Trace] = {}
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
WORKLOADS_FILE = "workloads.pickle"

# The engine's modules: what a graded run executes (the grader's own modules are not among them).
ENGINE_PACKAGES = ("nanovllm_teach.engine", "nanovllm_teach.sim", "nanovllm_teach.workload", "nanovllm_teach.layers",
                   "nanovllm_teach.models", "nanovllm_teach.utils", "nanovllm_teach.kernels")
ENGINE_MODULES = ("nanovllm_teach.llm", "nanovllm_teach.runs", "nanovllm_teach.config", "nanovllm_teach.settings",
                  "nanovllm_teach.sampling_params")

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


@functools.lru_cache(maxsize=None)
def _definitions(path: str, mtime: float) -> dict[str, tuple[str, ...]]:
    """The top-level functions and classes the file defines, each class with the functions of its body."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    found: dict[str, tuple[str, ...]] = {}
    for node in tree.body:
        if isinstance(node, _FUNCTIONS):
            found[node.name] = ()
        elif isinstance(node, ast.ClassDef):
            found[node.name] = tuple(n.name for n in node.body if isinstance(n, _FUNCTIONS))
    return found


def _defined_by(value: Any, module: str, qualname: str) -> bool:
    """Is ``value`` the function or class that ``module`` defines as ``qualname``? (A decorator may have made
    it an object of another kind, such as a torch custom operator: that is the module's own doing; what
    replaces a definition is a function or a class.)"""
    if isinstance(value, property):
        value = value.fget
    value = getattr(value, "__func__", value)  # staticmethod, classmethod, bound method
    if not (inspect.isfunction(value) or inspect.isclass(value) or isinstance(value, functools.partial)):
        return value is not None
    return getattr(value, "__module__", None) == module and getattr(value, "__qualname__", None) == qualname


def replaced_definitions() -> list[str]:
    """``module.name`` of every engine function, class or method in memory that is not the one its module's
    source defines (empty: the engine in this process is the one on disk; a module not imported yet is read
    from disk when the engine starts)."""
    replaced: list[str] = []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        engine = name in ENGINE_MODULES or any(name == p or name.startswith(p + ".") for p in ENGINE_PACKAGES)
        if not engine or not isinstance(path, str) or not path.endswith(".py"):
            continue
        namespace = vars(module)
        for top, methods in _definitions(path, os.path.getmtime(path)).items():
            value = namespace.get(top)
            if not _defined_by(value, name, top):
                replaced.append(f"{name}.{top}")
                continue
            replaced += [f"{name}.{top}.{m}" for m in methods
                         if not _defined_by(vars(value).get(m), name, f"{top}.{m}")]
    return replaced


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
    """The reference traces of ``workloads``: known already, recorded here, or being recorded in a fresh
    interpreter (with every other graded workload not yet known); ``traces()`` waits for them."""

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
        """Stop a recording still running (killing one that has ended does nothing) and remove its folder;
        nothing once ``traces()`` has run."""
        if self._process is not None:
            process, self._process = self._process, None
            process.kill()
            process.wait()
            self._folder.cleanup()

    def traces(self) -> dict[str, Trace]:
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
    import torch

    torch.set_num_threads(1)  # the model is tiny; the other core runs the student's code meanwhile
    with open(Path(args.out) / WORKLOADS_FILE, "rb") as file:
        workloads = pickle.load(file)
    for workload in workloads:
        record_graded(workload, Path(args.out) / f"{workload.name}.jsonl", args.model)
    return 0
