"""The near side of ``build check``'s sandbox: a chapter of a learner's folder started in the class grader's
sandbox, and its functions as proxies the checks call.

Role: teaching (the track), the checks' side of the sandbox's edge (``inside`` is the far side). Emits no events.

``ChapterSandbox(folder, part, time_limit)`` zips the learner's package (its ``.py`` files only, bounded),
and starts ``inside`` on it as the exercises' grader starts a worker, by the same ``isolation.launch``
(``exercises/confinement``: a job slot's own user id, a cgroup, the gate; ``exercises/isolation``: bubblewrap,
the grading copy of the package, ``env -i``, a bounded ``/dev/shm``), with the shipped checkpoint bound read-only at
the root under its own folder's name (``/qwen3-tiny``: a trace's header names the model by it, as outside).
``pieces`` says which of the chapter's functions are there and written; ``proxy(seam)`` is a function the
checks call in place of the learner's: it sends the arguments (``wire``), waits at most ``time_limit``
seconds, and returns what came back, or raises what the learner's function raised (a ``LearnerRaised`` named
as its type), or ``SandboxEnded`` (the time limit, the process's end). The references are computed out here,
by the checks, never by the process the learner's code runs in. Where bubblewrap or the uid drop is missing
(a learner's laptop), the chapter runs in a plain process with the same limits, and ``isolated`` says so.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
import uuid
import zipfile
from pathlib import Path
from typing import Any, Callable

from nanovllm_teach.exercises import confinement, isolation
from nanovllm_teach.exercises.base import visible
from nanovllm_teach.exercises.remote import STARTUP_LIMIT_S, quoted
from nanovllm_teach.i18n import Text, resolve_lang, say
from nanovllm_teach.track.messages import NOT_A_FRESH_MODEL
from nanovllm_teach.track.seams import PACKAGE, Seam
from nanovllm_teach.track.wire import (CHECK_BESIDE, Frame, FrameError, Packer, read_frame, tensors_of, unpack_answer,
                                       write_frame)

INSIDE_PACKAGE = f"{isolation.INSIDE_SUBMISSION}/package.zip"
# A chapter imports torch and transformers and runs the shipped model: more than an exercise's worker needs (its
# 1 GiB of address space), and the model's chapters pass within 3 GiB.
LIMITS = confinement.Limits(address_space=3 << 30, cpu_s=300, file_size=1 << 20, processes=32, open_files=128,
                            memory=2 << 30, cpus=1.0)
MAX_FILES = 96  # the skeleton has 52 with its glue; a learner may add helpers
MAX_FILE_BYTES = 256 << 10
MAX_SENTENCE = 4000  # characters of a check's sentence from inside: a first difference and the state around it

RAISED_WHILE_CHECKED = Text(en="your {name} raised {type} while its check ran: {message}",
                            zh="检查运行时，你的 {name} 抛出了 {type}：{message}")
TOO_LARGE = Text(en="{file} is larger than {limit} KiB: not checked",
                 zh="{file} 超过 {limit} KiB：不予检查")
TOO_MANY = Text(en="{folder} holds more than {limit} .py files: not checked",
                zh="{folder} 里的 .py 文件超过 {limit} 个：不予检查")
STOPPED = Text(en="  the check was stopped after {limit:g} s: does your code loop forever?",
               zh="  检查在 {limit:g} 秒后被停止：你的代码是否陷入了死循环？")
ENDED = Text(en="  the check ended without a verdict (exit code {code}): does your code end the process?",
             zh="  检查没有给出结论就结束了（退出码 {code}）：你的代码是否结束了这个进程？")
DAMAGED = Text(en="  your code sent back what is not a value ({error})", zh="  你的代码传回的不是一个值（{error}）")


class SandboxEnded(BaseException):
    """The chapter's process gave no answer (stopped at the time limit, or ended): ``str()`` is the sentence.
    A BaseException, so that the checks' own ``except Exception``, which turns what a learner's function raised
    into a sentence, lets it through: the check of the chapter ends there."""


class LearnerRaised(Exception):
    """What the learner's function raised in the sandbox (the subclass is named as its type was)."""


def package_archive(folder: Path, archive: Path) -> Path:
    """A zip of the ``.py`` files of ``folder``'s package (regular files only: no link is followed), each at
    most ``MAX_FILE_BYTES``, at most ``MAX_FILES``; ``ValueError`` naming what is over."""
    root = folder / PACKAGE
    files = sorted(p for p in root.rglob("*.py") if p.is_file() and not p.is_symlink()
                   and not any(part.is_symlink() for part in p.relative_to(folder).parents if str(part) != "."))
    if len(files) > MAX_FILES:
        raise ValueError(say(TOO_MANY, folder=PACKAGE, limit=MAX_FILES))
    with zipfile.ZipFile(archive, "w") as package:
        for path in files:
            relative = path.relative_to(folder).as_posix()
            if path.stat().st_size > MAX_FILE_BYTES:
                raise ValueError(say(TOO_LARGE, file=visible(relative), limit=MAX_FILE_BYTES >> 10))
            package.write(path, relative)
    return archive


class ChapterSandbox:
    """One chapter of one learner's folder in the sandbox, from start to ``close``."""

    def __init__(self, folder: Path, part: str, time_limit: float, graded: bool = False) -> None:
        """``part``: a chapter's number, or ``"final"`` (the learner's engine alone: ``result``); ``graded``: a
        class's grade, where the engine's own functions of the chapter raise inside."""
        from nanovllm_teach import default_model_path

        self.time_limit = time_limit
        self.isolated = isolation.available()
        self._model = default_model_path()
        self.load_error: str | None = None
        self.pieces: list[tuple[str, bool, bool]] = []
        self.printed = ""
        with tempfile.TemporaryDirectory(prefix="nanovllm-build-check-") as scratch:
            archive = package_archive(folder, Path(scratch) / "package.zip")
            tag = f"nanovllm-teach-chapter-{uuid.uuid4().hex}"
            self.confined = confinement.Confined(archive, tag, isolation.uid_drop(), LIMITS)  # its own copy
        self._output = tempfile.TemporaryFile()
        self._process: subprocess.Popen | None = None
        calls_r, self._calls_w = os.pipe()
        self._answers_r, answers_w = os.pipe()
        try:
            self._process = isolation.launch(
                self.confined, self.isolated, "track/inside.py", (),
                ((INSIDE_PACKAGE, self.confined.submission),
                 (f"/{Path(self._model).name}", Path(self._model))),
                [part, LIMITS.argument(), f"{calls_r},{answers_w}", resolve_lang(), "graded" if graded else "own", tag],
                (calls_r, answers_w), self._output)
        except BaseException:
            self.close()
            raise
        finally:
            os.close(calls_r)
            os.close(answers_w)

    def load(self) -> None:
        """Wait for the chapter's file to load: ``pieces`` or ``load_error`` (``SandboxEnded`` if neither came)."""
        self._answer(STARTUP_LIMIT_S)  # the interpreter and torch, started: none of it the learner's time
        first = self._answer(self.time_limit).tree
        if isinstance(first, dict) and isinstance(first.get("load_error"), str):
            self.load_error = visible(first["load_error"][:500])
        elif isinstance(first, dict) and isinstance(first.get("pieces"), list):
            self.pieces = [(str(n), p is True, w is True) for n, p, w in first["pieces"]]
        else:
            raise SandboxEnded(say(DAMAGED, error="pieces"))

    def result(self) -> Any:
        """The one answer of a run that answers once (``final``): what ``final_inside.run_final`` returned."""
        self._answer(STARTUP_LIMIT_S)  # the interpreter and torch, started: none of it the learner's time
        return self._answer(self.time_limit).tree

    def _answer(self, limit: float, deadline: float | None = None) -> Frame:
        """The next answer, within ``limit`` seconds from now or by ``deadline`` (a call's, which its sending
        started)."""
        try:
            return read_frame(self._answers_r, time.monotonic() + limit if deadline is None else deadline)
        except TimeoutError:
            raise SandboxEnded(say(STOPPED, limit=limit)) from None
        except FrameError as error:
            code = self._process.poll() if self._process is not None else None
            if code is None and self._process is not None:
                time.sleep(0.5)  # the answers' pipe closes a moment before the process is reaped
                code = self._process.poll()
            raise SandboxEnded(say(ENDED, code=code) if code is not None else say(DAMAGED, error=error)) from None

    def _named(self, value: Any) -> dict[str, Any] | None:
        """What ``wire.Packer`` sends for an object it does not carry itself (``wire``'s module docstring)."""
        from torch import nn

        from nanovllm_teach.models.qwen3 import Qwen3ForCausalLM
        from nanovllm_teach.track.checks import shipped_model

        if isinstance(value, Path) and value == self._model:
            return {"model_path": True}
        if not isinstance(value, nn.Module):
            return None
        for name, module in shipped_model()[0].named_modules():
            if module is value:
                return {"module": name}
        if isinstance(value, Qwen3ForCausalLM):
            return {"fresh_model": True}
        if type(value).__module__.startswith("nanovllm_teach.") and not list(value.parameters()):
            return {"new": f"{type(value).__module__}:{type(value).__qualname__}"}
        return None

    def proxy(self, seam: Seam) -> Callable[..., Any]:
        """The function the checks call in place of the learner's ``seam``."""
        def call(*args: Any) -> Any:
            return self._call(seam.qualname, args)
        return call

    def _ask(self, call: Frame) -> Frame:
        """Send ``call`` inside and wait for its answer (``SandboxEnded`` if none comes in time)."""
        deadline = time.monotonic() + self.time_limit  # for the call and its answer together
        try:
            write_frame(self._calls_w, call, deadline)
        except TimeoutError:  # the sandbox stopped reading: as an answer that never came
            raise SandboxEnded(say(STOPPED, limit=self.time_limit)) from None
        except OSError:
            self._answer(0.0)  # the process has ended: say how
        return self._answer(self.time_limit, deadline)

    def check_beside(self, seam: Seam) -> str | None:
        """The sentence of ``seam``'s check, run inside beside the learner's code (``Chapter.checked_beside``):
        a learner's own check, whose sentence is only shown (bounded, its control characters made visible)."""
        answer = self._ask(Frame(tree=CHECK_BESIDE, seam=seam.qualname))
        if answer.error is not None:  # raised where the check itself catches nothing: the learner's code
            return say(RAISED_WHILE_CHECKED, name=seam.qualname, type=visible(str(answer.error.get("type"))[:80]),
                       message=visible(str(answer.error.get("message"))[:300]))
        if not isinstance(answer.tree, dict) or not isinstance(answer.tree.get("problem"), (str, type(None))):
            raise SandboxEnded(say(DAMAGED, error=visible(repr(answer.tree)[:200])))
        problem = answer.tree["problem"]
        return None if problem is None else "\n".join(visible(line) for line in problem[:MAX_SENTENCE].splitlines())

    def _call(self, name: str, args: tuple[Any, ...]) -> Any:
        from nanovllm_teach.utils.context import get_context

        packer = Packer(self._named)
        tree = [packer.pack(a) for a in args]
        context = get_context()  # the prefill a check set for the block and the model, set again inside
        cu = packer.pack(context.cu_seqlens_q) if context.is_prefill and context.cu_seqlens_q is not None else None
        answer = self._ask(Frame(tree=tree, tensors=packer.tensors(), seam=name, cu_seqlens=cu))
        if answer.error is not None:
            raise named_error(answer.error)
        try:
            tensors = tensors_of(answer.tensors)
            for index, params in answer.state.items():
                _fill(args[int(index)], params, tensors)
            return unpack_answer(answer.tree, tensors)
        except (FrameError, ValueError, IndexError, RecursionError) as damaged:
            raise SandboxEnded(say(DAMAGED, error=visible(str(damaged)[:200]))) from None

    def close(self) -> str:
        """End the process and everything it started; what the learner's code printed, quoted ("" if nothing)."""
        self.confined.end(self._process)  # once: a second call does nothing
        if self._output.closed:
            return self.printed
        for fd in (self._calls_w, self._answers_r):
            try:
                os.close(fd)
            except (OSError, AttributeError):
                pass
        self._output.seek(0)
        printed = self._output.read()
        self._output.close()
        return quoted(printed) if printed.strip() else ""

    def __enter__(self) -> ChapterSandbox:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.printed = self.close()  # read by the verdict after the block


def named_error(error: dict[str, Any]) -> LearnerRaised:
    from nanovllm_teach.track.wire import named_type

    return named_type(error.get("type"), LearnerRaised)(visible(str(error.get("message", "")))[:300])


def _fill(model: Any, params: dict[str, str], tensors: dict[str, Any]) -> None:
    """The parameters the learner's loader filled in the sandbox, copied into the fresh model the check made
    (those of another shape stay as they were: the check names them)."""
    from nanovllm_teach.models.qwen3 import Qwen3ForCausalLM

    if not isinstance(model, Qwen3ForCausalLM) or not isinstance(params, dict):
        raise ValueError(say(NOT_A_FRESH_MODEL))
    own = dict(model.named_parameters())
    for name, tensor_name in params.items():
        if name in own and tensor_name in tensors and tensors[tensor_name].shape == own[name].shape:
            own[name].data.copy_(tensors[tensor_name])
