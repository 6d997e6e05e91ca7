"""What crosses the edge of ``build check``'s sandbox: a call of a learner's function and its answer, as frames.

Role: teaching (the track), both sides of the sandbox's edge (``sandbox`` outside, ``inside`` in it). Emits no
events.

A frame is a 4-byte big-endian length, then a ``msgspec`` MessagePack record (``Frame``): ``tree``, the call's
arguments or the answer's value as plain data, whose tensors are named (``{"t": name}``) and travel in
``tensors``, one safetensors file's bytes (never pickle: nothing in a frame can run code when it is read).
A frame is bounded (``MAX_FRAME``), and on the checking side has a deadline, going out and coming back. The objects a call needs beyond tensors and
numbers are named, never sent: a module of the shipped model by its path in it (``{"module": "model.layers.0"}``),
a fresh model for the loader to fill (``{"fresh_model": True}``; the answer then carries what the loader put
in it, ``state``), the checkpoint's folder (``{"model_path": True}``), a parameterless engine object
(``{"new": "nanovllm_teach.layers.sampler:Sampler"}``), a record of the engine (a dataclass, a named tuple) by
its fields. An answer's tree holds only tensors, tuples, lists and numbers: anything
else comes back as its type's name (``{"other": name}``), for the check to say what the learner returned.
"""

from __future__ import annotations

import dataclasses
import os
import re
import select
import struct
from typing import Any

import msgspec
import safetensors.torch
import torch

from nanovllm_teach.exercises.worker import wait_ready
from nanovllm_teach.i18n import say
from nanovllm_teach.track.messages import (CHANNEL_CLOSED, FRAME_TOO_LARGE, NOT_A_FRAME, NOT_A_VALUE,
                                           TENSORS_DO_NOT_READ)

MAX_FRAME = 64 << 20  # the largest answer: the shipped model's weights as the learner's loader filled them (8 MB)
_HEADER = struct.Struct(">I")
CHECK_BESIDE = "check"  # a call's tree asking for the seam's whole check inside (``Chapter.checked_beside``)


class Frame(msgspec.Struct, omit_defaults=True):
    """One call or one answer. A call: ``seam`` (its qualname), ``tree`` (the arguments, a list),
    ``cu_seqlens`` (the prefill the attention layers see, or None). An answer: ``tree`` (the value), or
    ``error`` (what the learner's function raised: type, message), ``state`` (per argument index, what the
    learner's loader put in a fresh model: names into ``tensors``)."""

    tree: Any = None
    tensors: bytes = b""
    seam: str = ""
    cu_seqlens: Any = None
    error: dict[str, Any] | None = None
    state: dict[str, dict[str, str]] = {}


class FrameError(Exception):
    """The other side closed the channel, or sent a frame too large or not a ``Frame``."""


def write_frame(fd: int, frame: Frame, deadline: float | None = None) -> None:
    """One frame to ``fd``; ``TimeoutError`` if it has not gone whole by ``deadline`` (``time.monotonic``: the
    checking side's, where the sandbox may have stopped reading a frame larger than the pipe holds)."""
    data = msgspec.msgpack.encode(frame)
    if len(data) > MAX_FRAME:
        raise FrameError(say(FRAME_TOO_LARGE, size=len(data), most=MAX_FRAME))
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        wait_ready(fd, True, deadline)
        view = view[os.write(fd, view[:select.PIPE_BUF] if deadline is not None else view):]


def read_frame(fd: int, deadline: float | None) -> Frame:
    """One frame from ``fd``; ``TimeoutError`` if it has not come whole by ``deadline`` (``time.monotonic``)."""
    def exactly(size: int) -> bytes:
        chunks, left = [], size
        while left:
            wait_ready(fd, False, deadline)
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                raise FrameError(say(CHANNEL_CLOSED))
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    (size,) = _HEADER.unpack(exactly(_HEADER.size))
    if size > MAX_FRAME:
        raise FrameError(say(FRAME_TOO_LARGE, size=size, most=MAX_FRAME))
    try:
        return msgspec.msgpack.decode(exactly(size), type=Frame)
    except msgspec.DecodeError as error:
        raise FrameError(say(NOT_A_FRAME, why=error)) from None


def tensors_of(data: bytes) -> dict[str, torch.Tensor]:
    """The tensors of a frame (safetensors: a header and raw numbers, checked against the bytes' length)."""
    if not data:
        return {}
    try:
        return safetensors.torch.load(data)
    except Exception as error:  # safetensors raises its own SafetensorError on damaged bytes
        raise FrameError(say(TENSORS_DO_NOT_READ, why=error)) from None


class Packer:
    """Turns values into a frame's tree, keeping their tensors apart (``tensors()``: the safetensors bytes).
    ``name_object`` names what is neither a tensor, a number, a tuple, a list nor a record (a module):
    a dict for the tree, or None, and then the object is sent as ``{"other": its type's name}``."""

    def __init__(self, name_object: Any = None) -> None:
        self._tensors: dict[str, torch.Tensor] = {}
        self._name_object = name_object

    def pack(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            name = str(len(self._tensors))
            # A copy of its own: safetensors refuses views that share memory (q, k and v of one projection).
            self._tensors[name] = value.detach().clone().contiguous()
            return {"t": name}
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        fields = _fields(value)
        if fields is not None:
            return {"record": f"{type(value).__module__}:{type(value).__qualname__}",
                    "fields": {name: self.pack(getattr(value, name)) for name in fields}}
        if isinstance(value, tuple):
            return {"tuple": [self.pack(v) for v in value]}
        if isinstance(value, list):
            return [self.pack(v) for v in value]
        named = self._name_object(value) if self._name_object is not None else None
        return named if named is not None else {"other": type(value).__name__}

    def tensors(self) -> bytes:
        return safetensors.torch.save(self._tensors) if self._tensors else b""


def _fields(value: Any) -> tuple[str, ...] | None:
    """The field names of a record (a dataclass or a named tuple: the engine's ``SamplingFilters``), else None."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return tuple(f.name for f in dataclasses.fields(value))
    if isinstance(value, tuple) and isinstance(getattr(type(value), "_fields", None), tuple):
        return type(value)._fields
    return None


def named_type(name: Any, base: type) -> type:
    """A subclass of ``base`` named as the learner's object's type was (``ValueError``), so that the check's
    sentence names it as it does in the learner's own process; only the letters of an identifier are kept."""
    clean = re.sub(r"\W", "", str(name))[:80]
    return type(clean if clean.isidentifier() else base.__name__, (base,), {})


class Other:
    """What a learner's function returned that is not a tensor, a number or a sequence: its type's name."""


def unpack_answer(tree: Any, tensors: dict[str, torch.Tensor]) -> Any:
    """An answer's value, from the learner's side: only tensors, numbers, strings, tuples and lists are
    rebuilt; a damaged tree (a tensor it does not carry, an unknown shape of data) raises ``FrameError``."""
    if tree is None or isinstance(tree, (bool, int, float, str)):
        return tree
    if isinstance(tree, list):
        return [unpack_answer(v, tensors) for v in tree]
    if isinstance(tree, dict) and set(tree) == {"t"} and tree["t"] in tensors:
        return tensors[tree["t"]]
    if isinstance(tree, dict) and set(tree) == {"tuple"} and isinstance(tree["tuple"], list):
        return tuple(unpack_answer(v, tensors) for v in tree["tuple"])
    if isinstance(tree, dict) and set(tree) == {"other"}:
        return named_type(tree["other"], Other)()
    if isinstance(tree, dict) and set(tree) == {"record", "fields"}:  # the loader's LoadReport: a record, not a value
        return named_type(str(tree["record"]).rpartition(":")[2], Other)()
    raise FrameError(say(NOT_A_VALUE))
