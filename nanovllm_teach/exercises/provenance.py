"""Is the engine in this process the engine on disk? The grader records its references in this process
only if it is (``references``).

A notebook cell, or a solution loaded in this process, may have replaced a piece of the engine
(``Scheduler.schedule_decode = mine``); a reference recorded with it would agree with the student by
construction. ``replaced_definitions()`` reads, for every engine module imported so far, which functions
and classes its source file defines at the top level (and the functions each class body defines), and
checks that the object now under each name is the one the module defined: same module, same qualified
name. A module not imported yet is read from disk when the engine starts, so it is as shipped.
"""

from __future__ import annotations

import ast
import functools
import inspect
import os
import sys
from typing import Any

# The engine's modules: what a graded run executes (the grader's own modules are not among them).
ENGINE_PACKAGES = ("nanovllm_teach.engine", "nanovllm_teach.sim", "nanovllm_teach.workload", "nanovllm_teach.layers",
                   "nanovllm_teach.models", "nanovllm_teach.utils", "nanovllm_teach.kernels")
ENGINE_MODULES = ("nanovllm_teach.llm", "nanovllm_teach.runs", "nanovllm_teach.config", "nanovllm_teach.settings",
                  "nanovllm_teach.sampling_params")

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _is_engine(name: str) -> bool:
    return name in ENGINE_MODULES or any(name == p or name.startswith(p + ".") for p in ENGINE_PACKAGES)


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
    source defines (empty: the engine in this process is the one on disk)."""
    replaced: list[str] = []
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if not _is_engine(name) or not isinstance(path, str) or not path.endswith(".py"):
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
