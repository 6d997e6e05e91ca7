"""The recorder every engine component emits TEACHING events into.

- ``NullRecorder``: recording off. ``emit`` is an empty method, and callers pass tensors by reference, so
  an engine that is not recording pays one no-op call per event.
- ``TraceRecorder``: keeps events in memory and/or streams them to a JSONL file (header line first, one
  whole line per event, flushed, so a crash loses at most the event being written), and can render each
  event to the console.

Tensor-valued stats are reduced here, not in the engine: ``x`` becomes ``x_shape`` plus, while the detail
budget lasts, ``x`` as a plain list. Anything with ``shape`` and ``tolist`` counts as a tensor, so this
module never imports torch.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import IO, Any, Callable

import msgspec

from nanovllm_teach.trace.schema import EVENTS, PHASES, TENSOR_EVENTS, TraceEvent

_KNOWN_EVENTS = frozenset(EVENTS)
_KNOWN_PHASES = frozenset(PHASES)
_ENCODER = msgspec.json.Encoder()


class Recorder:
    """Interface shared by the recorders. ``step`` is set by the engine around each ``step()``."""

    enabled: bool = False
    step: int | None = None

    def open(self, header: dict[str, Any]) -> None:
        """Start a trace: ``header`` describes the run (config, model, device, versions)."""

    def emit(self, event: str, phase: str, reason: str, /, **stats: Any) -> None:
        """Record one event at the current ``step``."""

    def close(self) -> None:
        """Finish the trace (flush and close the file, if any)."""


class NullRecorder(Recorder):
    """Recording off: every call does nothing."""


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "tolist")


_SCALARS = frozenset({int, float, str, bool, type(None)})


def _plain(value: Any) -> Any:
    """A JSON-ready copy of ``value`` (tuples become lists, tensors their values)."""
    if type(value) in _SCALARS:  # the common case first: no attribute lookups
        return value
    if isinstance(value, (list, tuple)):
        # Lists of plain numbers (token ids, seq ids, block ids) are copied in one go, not item by item.
        if all(type(v) in _SCALARS for v in value):
            return list(value)
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if _is_tensor(value):
        return value.tolist()
    for plain in (str, int, float):  # subclasses such as torch's version string become the plain type
        if isinstance(value, plain):
            return plain(value)
    return value


class TraceRecorder(Recorder):
    """Records events in memory (``events``) and, given ``path``, streams them to a JSONL file.

    ``detail_decode_steps``: how many decode steps keep tensor *values* (prefill steps always do);
    ``detail_max_elements``: tensors larger than this keep only their shape.
    ``sinks``: extra callables given each event as it is recorded (the console renderer is one).
    """

    enabled = True

    def __init__(self, path: str | Path | None = None, *, keep_in_memory: bool = True,
                 detail_decode_steps: int = 3, detail_max_elements: int = 4096,
                 sinks: list[Callable[[TraceEvent], None]] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.keep_in_memory = keep_in_memory
        self.detail_decode_steps = detail_decode_steps
        self.detail_max_elements = detail_max_elements
        self.sinks = list(sinks or [])
        self.header: dict[str, Any] | None = None
        self.events: list[TraceEvent] = []
        self.step = None
        self._file: IO[bytes] | None = None
        self._next_i = 0
        self._t0 = time.perf_counter_ns()
        self._decode_details = 0

    def open(self, header: dict[str, Any]) -> None:
        self.header = _plain(header)
        self._t0 = time.perf_counter_ns()
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = self.path.open("wb")
            self._write(self.header)

    def emit(self, event: str, phase: str, reason: str, /, **stats: Any) -> None:
        if event not in _KNOWN_EVENTS or phase not in _KNOWN_PHASES:
            raise ValueError(f"unknown event {event!r} or phase {phase!r}")
        record = TraceEvent(self._next_i, time.perf_counter_ns() - self._t0, event, phase, self.step,
                            reason, self._stats(event, stats))
        self._next_i += 1
        if self.keep_in_memory:
            self.events.append(record)
        if self._file is not None:
            self._write(record)
        for sink in self.sinks:
            sink(record)

    def _stats(self, event: str, stats: dict[str, Any]) -> dict[str, Any]:
        if event not in TENSOR_EVENTS:
            return _plain(stats)
        detailed = event == "PREPARE_PREFILL_TENSORS" or self._decode_details < self.detail_decode_steps
        if event == "PREPARE_DECODE_TENSORS" and detailed:
            self._decode_details += 1
        out: dict[str, Any] = {}
        for key, value in stats.items():
            if not _is_tensor(value):
                out[key] = _plain(value)
                continue
            out[f"{key}_shape"] = list(value.shape)
            numel = 1
            for n in value.shape:
                numel *= n
            if detailed and numel <= self.detail_max_elements:
                out[key] = value.tolist()
        return out

    def _write(self, obj: dict[str, Any] | TraceEvent) -> None:
        # Compact UTF-8 JSON, one line: the encoder writes a TraceEvent's fields in declaration order.
        self._file.write(_ENCODER.encode(obj) + b"\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def make_recorder(trace: "str | Path | Recorder | None") -> Recorder:
    """What ``LLM(trace=...)`` accepts: a path (record to that JSONL file), a recorder, or None (off)."""
    if trace is None:
        return NullRecorder()
    if isinstance(trace, Recorder):
        return trace
    if isinstance(trace, (str, Path)):
        return TraceRecorder(trace)
    raise TypeError(f"trace must be a path, a Recorder or None, not {type(trace).__name__}")
