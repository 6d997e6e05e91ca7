"""The engine's exercise points: every engine attribute that the classroom exercises replace.

The autograder (``nanovllm_teach.exercises``) grades a student's function by putting it in place of one of
these attributes for the length of one run, in a child process, and comparing the run's TEACHING trace with
the untouched engine's. Renaming one of them, or changing its arguments, breaks the exercise that replaces
it: ``tests/test_exercises.py`` checks that each point exists and takes the arguments its template does.

``read_memory`` is replaced by the grader itself, not by a student: it pins the memory reading so that the
KV-cache size comes out the same on every machine.

No torch here: the points are named, and imported only when one is resolved.
"""

from __future__ import annotations

import importlib
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator


@dataclass(frozen=True)
class ExercisePoint:
    """``module``'s attribute ``attribute`` (``Class.method`` or a module-level function)."""

    module: str
    attribute: str
    meaning: str

    def owner(self) -> Any:
        """The module or class that holds the attribute."""
        owner: Any = importlib.import_module(self.module)
        for part in self.attribute.split(".")[:-1]:
            owner = getattr(owner, part)
        return owner

    @property
    def name(self) -> str:
        return self.attribute.split(".")[-1]

    def resolve(self) -> Any:
        return getattr(self.owner(), self.name)


POINTS: dict[str, ExercisePoint] = {
    "choose_next": ExercisePoint("nanovllm_teach.engine.scheduler", "choose_next",
                                 "the scheduling policy: which waiting sequence is admitted next"),
    "schedule_decode": ExercisePoint("nanovllm_teach.engine.scheduler", "Scheduler._schedule_decode",
                                     "choose this decode step's sequences, preempting when blocks run out"),
    "schedule_prefill": ExercisePoint("nanovllm_teach.engine.scheduler", "Scheduler._schedule_prefill",
                                      "admit waiting prompts under the token budget, chunking the first"),
    "postprocess": ExercisePoint("nanovllm_teach.engine.scheduler", "Scheduler.postprocess",
                                 "take in a step's sampled tokens: cache, append, finish"),
    "allocate": ExercisePoint("nanovllm_teach.engine.block_manager", "BlockManager.allocate",
                              "fill a new sequence's block table: its cached prefix blocks shared, the rest fresh"),
    "can_append": ExercisePoint("nanovllm_teach.engine.block_manager", "BlockManager.can_append",
                                "can a sequence compute its newest token (is a block free if it needs one)"),
    "may_append": ExercisePoint("nanovllm_teach.engine.block_manager", "BlockManager.may_append",
                                "give a sequence the new block its newest token needs"),
    "compute_block_hash": ExercisePoint("nanovllm_teach.engine.block_manager", "compute_block_hash",
                                        "the chained hash naming a full block for the prefix cache"),
    "decode_slot": ExercisePoint("nanovllm_teach.engine.model_runner", "decode_slot",
                                 "the KV-cache slot a decode step writes a sequence's newest token to"),
    "kv_block_bytes": ExercisePoint("nanovllm_teach.engine.model_runner", "kv_block_bytes",
                                    "bytes one KV block takes over all layers"),
    "kv_cache_blocks": ExercisePoint("nanovllm_teach.engine.model_runner", "kv_cache_blocks",
                                     "how many KV blocks the memory budget allows"),
    "read_memory": ExercisePoint("nanovllm_teach.engine.model_runner", "read_memory",
                                 "the device's memory reading the KV budget is computed from (grader only)"),
}


@contextmanager
def replaced(point: str, value: Any) -> Iterator[None]:
    """The exercise point ``point`` is ``value`` inside the block; the original comes back however it ends."""
    where = POINTS[point]
    owner = where.owner()
    original = getattr(owner, where.name)
    setattr(owner, where.name, value)
    try:
        yield
    finally:
        setattr(owner, where.name, original)
