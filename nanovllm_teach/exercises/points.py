"""Exercise points: the engine attributes a grader puts other code in place of, named ``"module:attribute"``.

An exercise names the point its learner's function replaces (``"nanovllm_teach.engine.scheduler:
Scheduler.schedule_decode"``, a method; ``"nanovllm_teach.engine.block_manager:compute_block_hash"``, a
function); the grader replaces it for the length of one run, in the grading child only, and the original
comes back however the run ends. The grader also pins the engine's memory reading this way
(``READ_MEMORY``), so that the KV-cache size comes out the same on every machine. Renaming a point's
attribute, or changing its arguments, breaks the exercise: ``tests/test_exercises.py`` checks that every
point exists and takes the arguments its template does.

No torch here: a point's module is imported only when the point is resolved.
"""

from __future__ import annotations

import importlib
from contextlib import contextmanager
from typing import Any, Iterator

READ_MEMORY = "nanovllm_teach.engine.model_runner:read_memory"


def owner(point: str) -> Any:
    """The module or class that holds ``point``'s attribute."""
    module, _, attribute = point.partition(":")
    holder: Any = importlib.import_module(module)
    for part in attribute.split(".")[:-1]:
        holder = getattr(holder, part)
    return holder


def resolve(point: str) -> Any:
    """What stands at ``point`` now."""
    return getattr(owner(point), point.rsplit(".", 1)[-1].rsplit(":", 1)[-1])


@contextmanager
def replaced(point: str, value: Any) -> Iterator[None]:
    """``point`` is ``value`` inside the block; the original comes back however it ends."""
    holder, name = owner(point), point.rsplit(".", 1)[-1].rsplit(":", 1)[-1]
    original = getattr(holder, name)
    setattr(holder, name, value)
    try:
        yield
    finally:
        setattr(holder, name, original)
