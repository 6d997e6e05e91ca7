"""The far side of ``build check``'s sandbox: the only process where a learner's chapter runs, answering calls.

Role: teaching (the track), inside the grading sandbox (``sandbox`` starts it). Emits no events.

It runs as a script (``python inside.py ROOT PACKAGE MODEL CHAPTER LIMITS FDS LANG GRADED``; CHAPTER
``final``: ``final_inside.run_final`` answers once instead) on the grading
copy of the package (``isolation.grading_root``), in bubblewrap as a job slot's user id where the machine gives them, with
the grader's limits set before the learner's files are read. ``PACKAGE`` is a zip of the learner's package
(``sandbox`` made it from their folder), unpacked into this process's private ``/tmp``; ``MODEL`` is the
shipped checkpoint, bound read-only. The first frame says it is ready; the second which of the chapter's
pieces are there and written (``{"pieces": [[qualname, present, written], ...]}``) or why the chapter's
file did not load; then each call (``wire.Frame``) of one of the chapter's written functions is answered with
its result or what it raised; a chapter checked beside the learner's code (``Chapter.checked_beside``)
asks instead, seam by seam, for the check's own sentence (a call whose tree is ``CHECK_BESIDE``). For a class's grade (``GRADED`` is ``graded``) the engine's own functions of the
chapter raise (``_disable``). Nothing it answers is trusted outside: the references are computed there, and
the engine here (which the learner's code may patch) only serves the learner's own calls.
"""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any, Callable

MODULE_PREFIX = "nanovllm_teach."  # the only objects a call may name to be made here
FINAL = "final"  # CHAPTER for the finish line: the learner's engine run alone (``final_inside``)


def _shipped_model(model_path: str) -> Any:
    """The shipped checkpoint in the engine's Qwen3 (made once: when a call first names one of its modules, or
    before a class's grade disables the chapter's loader)."""
    from transformers import AutoConfig

    from nanovllm_teach.models.loader import load_model
    from nanovllm_teach.models.qwen3 import Qwen3ForCausalLM

    model = Qwen3ForCausalLM(AutoConfig.from_pretrained(model_path))
    load_model(model, model_path)
    return model


class Unpacker:
    """A call's arguments rebuilt from its tree: tensors, and the objects ``wire.Packer`` named."""

    def __init__(self, model_path: str) -> None:
        self.model_path = model_path
        self._model: Any = None
        self.fresh: dict[int, Any] = {}  # argument index: a fresh model whose parameters go back (the loader)

    def model(self) -> Any:
        if self._model is None:
            self._model = _shipped_model(self.model_path)
        return self._model

    def arguments(self, tree: list[Any], tensors: dict[str, Any]) -> list[Any]:
        self.fresh = {}
        return [self._value(value, tensors, index) for index, value in enumerate(tree)]

    def _value(self, tree: Any, tensors: dict[str, Any], index: int) -> Any:
        import pkgutil

        if not isinstance(tree, dict):
            return [self._value(v, tensors, index) for v in tree] if isinstance(tree, list) else tree
        if "t" in tree:
            return tensors[tree["t"]]
        if "tuple" in tree:
            return tuple(self._value(v, tensors, index) for v in tree["tuple"])
        if "model_path" in tree:
            return Path(self.model_path)
        if "module" in tree:
            return self.model().get_submodule(tree["module"])
        if "fresh_model" in tree:
            from transformers import AutoConfig

            from nanovllm_teach.models.qwen3 import Qwen3ForCausalLM

            fresh = Qwen3ForCausalLM(AutoConfig.from_pretrained(self.model_path))
            for param in fresh.parameters():
                param.data.fill_(float("nan"))  # a parameter the learner's loader never writes stays visibly empty
            self.fresh[index] = fresh
            return fresh
        name = tree.get("new") or tree.get("record")
        assert isinstance(name, str) and name.startswith(MODULE_PREFIX), f"not an engine object: {tree}"
        made = pkgutil.resolve_name(name)
        if "new" in tree:
            return made()
        return made(**{key: self._value(v, tensors, index) for key, v in tree["fields"].items()})


def _disable(chapter: Any, lang: str) -> None:
    """A class's grade: the engine's own functions of the chapter raise from now on, as an exercise's points do
    in the grading copy (``isolation.NOT_AVAILABLE``), so that a student's function that only calls the engine's
    fails (the shipped model's layers then run the student's methods: ``_as_students``)."""
    from nanovllm_teach.exercises.isolation import NOT_AVAILABLE
    from nanovllm_teach.i18n import say
    from nanovllm_teach.track.extract import reference
    from nanovllm_teach.track.learner import bindings, reference_owner

    for seam in chapter.seams:
        name = seam.qualname.rpartition(".")[2]

        def stand_in(*args: Any, _message: str = say(NOT_AVAILABLE, lang, name=name), **kwargs: Any) -> Any:
            raise RuntimeError(_message)

        if seam.owner is not None:
            setattr(reference_owner(seam), name, stand_in)
            continue
        for module, attribute in list(bindings(reference(seam))):
            setattr(module, attribute, stand_in)


def _as_students(model: Any, pieces: list[Any]) -> None:
    """A class's grade: every layer of the shipped model whose class has a method of the chapter becomes an
    instance of the student's subclass, so that the engine's code between the chapter's methods (a layer calling
    its attention) calls the student's, and a student's method calling the engine's (``super()``) reaches the
    disabled one."""
    from nanovllm_teach.track.learner import reference_owner

    for piece in pieces:
        if piece.seam.owner is None:
            continue
        engine = reference_owner(piece.seam)
        students = getattr(sys.modules.get(piece.function.__module__), piece.seam.owner, None)
        if not isinstance(students, type) or not issubclass(students, engine):
            continue
        for module in model.modules():
            if type(module) is engine:
                module.__class__ = students


def _unpacked(archive: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="learner-"))
    with zipfile.ZipFile(archive) as package:
        package.extractall(folder)  # made by ``sandbox`` from checked names; nothing else writes it
    return folder


def _functions(folder: Path, chapter: Any) -> tuple[dict[str, Any], list[Any]]:
    """The chapter's first answer and its written pieces."""
    from nanovllm_teach.track.learner import chapter_file

    loaded = chapter_file(folder, chapter)
    if loaded.load_error is not None:
        return {"load_error": loaded.load_error[:500]}, []
    pieces = [[p.seam.qualname, p.function is not None, p.written] for p in loaded.pieces]
    return {"pieces": pieces}, [p for p in loaded.pieces if p.written and p.function is not None]


def _answer(function: Callable[..., Any], call: Any, unpacker: Unpacker) -> Any:
    import torch

    from nanovllm_teach.exercises.worker import describe_error
    from nanovllm_teach.track.checks import prefill_of
    from nanovllm_teach.track.wire import Frame, Packer, tensors_of

    tensors = tensors_of(call.tensors)
    cu = tensors[call.cu_seqlens["t"]] if call.cu_seqlens is not None else None
    try:
        with torch.inference_mode(), prefill_of(cu):
            result = function(*unpacker.arguments(call.tree, tensors))
        packer = Packer()
        tree = packer.pack(result)
        state = {str(index): {name: packer.pack(param.data)["t"] for name, param in fresh.named_parameters()}
                 for index, fresh in unpacker.fresh.items()}
        return Frame(tree=tree, tensors=packer.tensors(), state=state)
    except Exception as error:  # the learner's code: what it raised is the answer
        described = describe_error(error, None)
        return Frame(error={"type": described.type, "message": described.message})


def _checked_beside(seam: Any, function: Callable[..., Any]) -> Any:
    """The seam's whole check run here, the engine on the learner's piece: its sentence (None: it matches)."""
    from nanovllm_teach.track.checks import check_seam
    from nanovllm_teach.track.wire import Frame

    try:
        return Frame(tree={"problem": check_seam(seam, function)})
    except Exception as error:  # the learner's code raised where the check did not expect it: said as theirs
        from nanovllm_teach.exercises.worker import describe_error

        described = describe_error(error, None)
        return Frame(error={"type": described.type, "message": described.message})


def main() -> None:
    """The arguments are the module docstring's; the last one (a tag marking the process) is not read."""
    root, archive, model_path, chapter_name, limits, fds, lang, graded = sys.argv[1:9]
    calls_fd, answers_fd = (int(fd) for fd in fds.split(","))
    sys.path[0] = root  # the package as graded, not this script's folder
    from nanovllm_teach.exercises.worker import set_limits

    set_limits(*(int(v) for v in limits.split(",")))
    import torch

    from nanovllm_teach.i18n import say, set_lang
    from nanovllm_teach.track.chapters import chapter_named
    from nanovllm_teach.track.messages import RESULT_TOO_LARGE
    from nanovllm_teach.track.wire import CHECK_BESIDE, Frame, FrameError, read_frame, write_frame

    torch.set_num_threads(1)  # one CPU in the sandbox's cgroup
    import nanovllm_teach.assets

    # The grading copy holds no checkpoint: the shipped one is bound read-only at ``model_path``, and an engine
    # started here without a model (a check run beside the learner's code) loads it from there.
    nanovllm_teach.assets.DEFAULT_MODEL_DIR = Path(model_path)
    set_lang(lang)
    write_frame(answers_fd, Frame(tree={"ready": True}))
    if chapter_name == FINAL:  # the learner's engine alone: one answer, the run (``final_inside``)
        from nanovllm_teach.track.final_inside import run_final

        write_frame(answers_fd, Frame(tree=run_final(_unpacked(archive), model_path)))
        sys.stdout.flush()
        os._exit(0)
    chapter, unpacker = chapter_named(chapter_name), Unpacker(model_path)
    if graded == "graded":
        unpacker.model()  # loaded by the engine's own loader before a chapter's loader is disabled
        _disable(chapter, lang)
    folder = _unpacked(archive)
    sys.path.insert(1, str(folder))  # the learner's files import each other as in their own folder
    first, pieces = _functions(folder, chapter)
    write_frame(answers_fd, Frame(tree=first))
    functions = {piece.seam.qualname: piece.function for piece in pieces}
    seams = {piece.seam.qualname: piece.seam for piece in pieces}
    if graded == "graded":
        _as_students(unpacker.model(), pieces)
    while True:
        call = read_frame(calls_fd, None)
        if call.seam not in functions:
            break
        try:
            if call.tree == CHECK_BESIDE and chapter.checked_beside and graded != "graded":
                write_frame(answers_fd, _checked_beside(seams[call.seam], functions[call.seam]))
            else:
                write_frame(answers_fd, _answer(functions[call.seam], call, unpacker))
        except FrameError as too_large:  # the learner's result: said as what their function did
            too_large_error = {"type": "ValueError", "message": say(RESULT_TOO_LARGE, why=too_large)}
            write_frame(answers_fd, Frame(error=too_large_error))
    sys.stdout.flush()
    os._exit(0)  # a thread the learner left running ends here, with the process


if __name__ == "__main__":
    main()
