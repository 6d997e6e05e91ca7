"""The learner's package as the track sees it: its files loaded, which seams are written, and the engine run
with the learner's functions in place of its own.

Role: teaching (the track). Emits no events (the engine it runs emits its own).

``pieces(folder)`` loads each chapter's file afresh (an edited file is read again, in a notebook too) and
says, seam by seam, whether the learner wrote it (``extract.is_written``). A chapter file imports what the
learner does not write from the folder's glue (``myvllm.glue``): here, where each piece is checked inside the
reference engine, that is the engine's own modules (``glue.GlueIsTheEngine``). ``installed(pieces)`` puts the
written ones where the engine looks them up, for the length of a ``with`` block: a method into the engine's
class, a function into every module that bound the engine's (``from ... import apply_rotary`` makes a
binding of its own in each importer), the learner's files included, so one chapter's solution calls
another chapter's piece when the learner has written it. What is not written stays the engine's: the
skeleton runs from the first chapter, and inside the learner's own files too: a stub's name there is made to
mean the engine's function (``_fall_back``). ``generate`` runs the engine on the learner's pieces and returns
its outputs with the TEACHING trace of that run.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable
from unittest import mock

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.track.chapters import CHAPTERS
from nanovllm_teach.track.seams import PACKAGE, Chapter, Seam
from nanovllm_teach.track.extract import is_written, reference
from nanovllm_teach.track.glue import use_engine_as_glue

YOURS = Text(en="{name:<28} yours", zh="{name:<28} 你的")
ENGINES = Text(en="{name:<28} the engine's (not written yet)", zh="{name:<28} 引擎的（你还没有写）")
NOT_LOADED = Text(en="{file} could not be loaded: {error}", zh="{file} 无法加载：{error}")


@dataclass(frozen=True)
class Piece:
    """One seam of a learner's folder: the learner's function (None: missing from the file) and whether it
    is written (a stub is not)."""

    seam: Seam
    function: Callable[..., Any] | None
    written: bool


@dataclass(frozen=True)
class ChapterFile:
    """A chapter's file as loaded: its pieces, or why it could not be loaded."""

    chapter: Chapter
    pieces: tuple[Piece, ...]
    load_error: str | None = None


def _package(folder: Path) -> None:
    """The learner's package itself, from ``folder`` unless it is loaded already (its folder on ``sys.path``,
    or an earlier chapter): the parent of the glue's names and of the learner's own modules, which a chapter
    file may import by their package's name (``from myvllm.layers.norms import rms_norm``)."""
    if PACKAGE not in sys.modules:
        root = folder / PACKAGE
        _load(root / "__init__.py", PACKAGE, [str(root)])


def _load(path: Path, name: str, search: list[str] | None = None) -> ModuleType:
    """Execute ``path`` as the module ``name`` (a package when ``search`` names its folders), afresh (a
    learner edits and runs again)."""
    spec = importlib.util.spec_from_file_location(name, path, submodule_search_locations=search)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _looked_up(module: ModuleType, qualname: str) -> Callable[..., Any] | None:
    value: Any = module
    for part in qualname.split("."):
        value = value.__dict__.get(part) if hasattr(value, "__dict__") else None
    return value if callable(value) else None


def chapter_file(folder: str | Path, chapter: Chapter) -> ChapterFile:
    """``chapter``'s file in ``folder``, loaded: each seam's function and whether it is written. A file that
    raises while it loads (a syntax error, a bad import) gives its error instead of pieces."""
    path = Path(folder) / chapter.file
    name = chapter.file.removesuffix(".py").replace("/", ".")
    use_engine_as_glue()  # the chapter imports from myvllm.glue: the engine's own modules here
    try:
        _package(Path(folder))
        module = _load(path, name)
    except Exception as error:  # the learner's file: anything it raises is theirs to see
        return ChapterFile(chapter, (), f"{type(error).__name__}: {error}")
    pieces = []
    for seam in chapter.seams:
        function = _looked_up(module, seam.qualname)
        piece = Piece(seam, function, function is not None and is_written(function))
        if function is not None and not piece.written:
            _fall_back(module, seam)
        pieces.append(piece)
    return ChapterFile(chapter, tuple(pieces))


def _fall_back(module: ModuleType, seam: Seam) -> None:
    """A stub's name in the learner's module made to mean the engine's function, so that the learner's
    written functions that call it (``causal_prefill`` calls ``attend``) run: a function rebound to the
    engine's, a method removed from the learner's subclass, which then inherits the engine's."""
    if seam.owner is None:
        setattr(module, seam.qualname, reference(seam))
    else:
        owner, method = seam.qualname.rsplit(".", 1)
        delattr(_looked_up(module, owner), method)


def whose(folder: str | Path, chapter: Chapter) -> str:
    """One line per seam of ``chapter``: whether the learner's function or the engine's runs."""
    loaded = chapter_file(folder, chapter)
    if loaded.load_error is not None:
        return say(NOT_LOADED, file=chapter.file, error=loaded.load_error)
    return "\n".join(say(YOURS if piece.written else ENGINES, name=piece.seam.qualname) for piece in loaded.pieces)


def written_pieces(folder: str | Path, chapters: Iterable[Chapter] = CHAPTERS) -> list[Piece]:
    """The written pieces of ``folder``'s chapters (the rest is the engine's). A file that does not load is
    skipped here: ``build check`` names its error."""
    return [piece for chapter in chapters for piece in chapter_file(folder, chapter).pieces if piece.written]


def bindings(target: Callable[..., Any]) -> Iterator[tuple[ModuleType, str]]:
    """Every module of the engine or of the learner's package that binds ``target`` at its top level."""
    for name, module in list(sys.modules.items()):
        if module is None or not (name.startswith("nanovllm_teach.") or name.startswith(f"{PACKAGE}.")):
            continue
        for attr, value in list(vars(module).items()):
            if value is target:
                yield module, attr


@contextmanager
def installed(pieces: Iterable[Piece]) -> Iterator[None]:
    """The learner's written pieces where the engine looks them up, for the length of the block."""
    with ExitStack() as stack:
        for piece in pieces:
            if not piece.written or piece.function is None:
                continue
            seam = piece.seam
            if seam.owner is not None:
                owner = reference_owner(seam)
                stack.enter_context(mock.patch.object(owner, seam.qualname.rpartition(".")[2], piece.function))
                continue
            for module, attr in list(bindings(reference(seam))):
                stack.enter_context(mock.patch.object(module, attr, piece.function))
        yield


def reference_owner(seam: Seam) -> type:
    """The engine class a method seam belongs to."""
    module = importlib.import_module(seam.module)
    return _looked_up(module, seam.owner)  # type: ignore[return-value]


def generate(folder: str | Path, prompts: list[str], sampling_params: Any,
             **engine_settings: Any) -> tuple[list[Any], Any]:
    """The engine on the shipped model with ``folder``'s written pieces in place of its own: the outputs and
    the TEACHING trace of the run. The plain PyTorch attention and the eager decode step, so that every step
    goes through the layers (the compiled CPU decode step and the C++ attention are the engine's own)."""
    from nanovllm_teach import LLM
    from nanovllm_teach.trace import Trace, TraceRecorder

    recorder = TraceRecorder()
    settings = {"device": "cpu", "max_model_len": 256, "kvcache_block_size": 8, "num_kvcache_blocks": 32,
                "enable_prefix_caching": False, "attention_backend": "torch", "enforce_eager": True,
                **engine_settings}
    with installed(written_pieces(folder)):
        llm = LLM(trace=recorder, **settings)
        try:
            outputs = llm.generate(prompts, sampling_params, use_tqdm=False)
        finally:
            llm.close()
    return outputs, Trace.from_recorder(recorder)
