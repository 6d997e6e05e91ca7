"""The build-it-yourself track's chapters: which of the engine's functions a learner rewrites, and where.

Role: teaching (the track), beside the engine, not in it. Pure data; emits no events.

Each chapter is one file of the learner's package (``Chapter.file``) and a few **seams** (``Seam``,
``track/seams.py``). The engine's function behind a seam is the reference: the skeleton's stub raises
``NotImplementedError`` until the learner writes it, and until then the engine's own function runs in its
place; the solutions are the engine's own source (``extract``). Chapters 1-5 build the model path
(``chapters_model``), 6-10 the engine around it: the KV cache, paging, the block manager, the scheduler and
the loop (``chapters_engine``).
"""

from __future__ import annotations

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.track.chapters_engine import ENGINE_CHAPTERS
from nanovllm_teach.track.chapters_model import MODEL_CHAPTERS
from nanovllm_teach.track.seams import Chapter

UNKNOWN_CHAPTER = Text(en="unknown chapter {name!r}; choose from: {choices}", zh="没有第 {name!r} 章；可选：{choices}")

CHAPTERS: tuple[Chapter, ...] = MODEL_CHAPTERS + ENGINE_CHAPTERS


def chapter_named(name: str) -> Chapter:
    """The chapter ``name`` is (its number or its slug); ``ValueError`` naming it otherwise."""
    for chapter in CHAPTERS:
        if name in (str(chapter.number), chapter.slug):
            return chapter
    choices = ", ".join(f"{c.number} ({c.slug})" for c in CHAPTERS)
    raise ValueError(say(UNKNOWN_CHAPTER, name=name, choices=choices))
