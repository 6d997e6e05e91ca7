"""The build-it-yourself track's vocabulary: a seam (one of the engine's functions a learner writes again)
and a chapter (one file of the learner's package and its seams).

Role: teaching (the track), beside the engine, not in it. Pure data; emits no events.

A seam's ``point`` names a function as ``pkgutil.resolve_name`` reads it: the reference the learner's function
is checked against, the source its solution is copied from, and what runs until the learner writes it. A seam
on a method (``Class.method``) is written in a subclass of the engine's class, so ``self`` is the engine's own
object (a layer with its weights, an attention backend).
"""

from __future__ import annotations

from dataclasses import dataclass

from nanovllm_teach.i18n import Text

PACKAGE = "myvllm"  # the learner's package, inside the folder ``build start`` writes


@dataclass(frozen=True)
class Seam:
    """One function the learner writes: the engine's ``point`` and the contract its stub's docstring states."""

    point: str  # "module:qualname" of the engine's function, the reference
    contract: Text

    @property
    def module(self) -> str:
        return self.point.split(":")[0]

    @property
    def qualname(self) -> str:
        return self.point.split(":")[1]

    @property
    def owner(self) -> str | None:
        """The engine class the seam is a method of (None: a module-level function)."""
        return self.qualname.rpartition(".")[0] or None


@dataclass(frozen=True)
class Chapter:
    number: int
    slug: str  # what ``build check DIR CHAPTER`` accepts besides the number
    title: Text
    file: str  # the chapter's file, relative to the folder ``build start`` writes
    seams: tuple[Seam, ...]
    notebook: str  # the chapter's notebook, its name in the course's notebooks/ (without .ipynb)
    # True: the check runs the engine on the learner's pieces inside the sandbox, beside their code (a cache
    # changed in place, a block manager, a scheduler, the loop: engine objects that cannot cross as data), and
    # only its sentence comes out. A learner's own check; not a class's grade, where the reference must be
    # computed where no student's code runs.
    checked_beside: bool = False
