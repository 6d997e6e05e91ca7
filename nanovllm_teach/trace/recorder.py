"""The recorder every engine component emits TEACHING events into.

- ``NullRecorder``: recording off (``enabled`` is False): every call does nothing.
- ``TraceRecorder``: keeps events in memory and/or streams them to a JSONL file (header line first, one
  whole line per event), and hands each event to its sinks (the console renderer is one) as it is
  recorded. A step's events are written and flushed together when the step ends. Inside
  ``with rec.flushing_deferred():`` (``generate`` runs its steps so) a step's lines reach the disk at most
  ``FLUSH_SECONDS`` later instead; a step ended by an exception (Ctrl-C), an event outside a step and the
  end of the block flush at once. So a file is complete whenever ``step`` or ``generate`` returns or
  raises, and a process killed outright loses at most its last ``FLUSH_SECONDS`` of steps.

How an engine emits (one call at the decision point, no payload built while recording is off)::

    if self.rec.enabled:
        self.rec.record("decode", "step_complete", StepDone(latency_ms=..., seq_ids=[...], ...))

``record`` is the only way in: the event is the payload's type. ``set_clock(fn)`` makes
``t_ns`` come from ``fn`` (nanoseconds) instead of the host's clock: a simulated engine stamps its events
with simulated time. Step scoping is
``with rec.at_step(n): ...`` (``rec.step`` reads the current step); work that belongs to no trace, such as
the warm-up, runs inside ``with rec.paused(): ...``.

Recording never corrupts the engine. The policy: if writing the file fails (``OSError``: disk full, file
too large, ...) or a sink raises an ``Exception``, recording stops there: one ``RecordingStopped`` warning
says why, ``enabled`` turns False, the file keeps what was written before (its last line may be cut short:
``load_trace(path, strict=False)`` skips it), and the engine carries on as if started without a trace. ``KeyboardInterrupt`` (and any other ``BaseException``) from a
sink or the file propagates: that is the user stopping the run, which the engine's abort path handles.
Opening the file (``open``) still raises: that happens before the engine starts, on a path the user gave.

Nothing on disk is replaced before the engine has started: ``TraceRecorder(path)`` writes to a temporary
file beside ``path`` and moves it into place when ENGINE_READY is recorded (or at ``close``). A recorder
dropped before either (an engine that failed to start) removes its temporary file and leaves ``path`` as
it was.

Tensor-valued stats are reduced here, not in the engine: ``x`` becomes ``x_shape`` plus, while the detail
budget lasts, ``x`` as a plain list. Anything with ``shape`` and ``tolist`` counts as a tensor, so this
module never imports torch.
"""

from __future__ import annotations

import math
import os
import time
import warnings
import weakref
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Callable, Iterator

import msgspec
from msgspec import UNSET

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.trace.events import check_payload
from nanovllm_teach.trace.payload import Payload
from nanovllm_teach.trace.schema import EVENTS, PHASES, TENSOR_EVENTS, TraceEvent

_KNOWN_EVENTS = frozenset(EVENTS)
_KNOWN_PHASES = frozenset(PHASES)
_ENCODER = msgspec.json.Encoder()
UNKNOWN_EVENT = Text(en="unknown event {event!r} or phase {phase!r}", zh="未知的事件 {event!r} 或阶段 {phase!r}")
STOPPED_KEEPS_FILE = Text(en="recording stopped at event {i}: {kind}: {error}; {path} keeps the events written before "
                             "it. The engine carries on without recording.",
                          zh="记录在第 {i} 个事件处停止：{kind}: {error}；{path} 保留了此前写下的事件。引擎继续运行，但不再记录。")
STOPPED = Text(en="recording stopped at event {i}: {kind}: {error}. The engine carries on without recording.",
               zh="记录在第 {i} 个事件处停止：{kind}: {error}。引擎继续运行，但不再记录。")
NOT_A_TRACE = Text(en="trace must be a path, a Recorder or None, not {kind}",
                   zh="trace 必须是路径、Recorder 或 None，而不是 {kind}")
FLUSH_SECONDS = 0.1  # how stale the file on disk may be while generate() runs its steps
# Big enough that the writer does not flush on its own between two of ours (a step of 256 sequences on a
# GPU writes ~15 KB, and FLUSH_SECONDS holds some tens of steps).
WRITE_BUFFER_BYTES = 1 << 20


class RecordingStopped(RuntimeWarning):
    """Recording stopped because the trace file or a sink failed; the engine carried on."""


class Recorder:
    """Interface shared by the recorders. ``step``: the engine step being recorded (None between steps)."""

    enabled: bool = False
    step: int | None = None

    def open(self, header: dict[str, Any]) -> None:
        """Start a trace: ``header`` describes the run (config, model, device, versions)."""

    def set_clock(self, clock: Callable[[], int]) -> None:
        """Events are stamped with ``clock()`` (nanoseconds; only differences count) from now on; call it
        before ``open``, where the trace's time zero is taken."""

    def record(self, phase: str, reason: str, payload: Payload, /) -> None:
        """Record one event at the current ``step``, given as its typed payload (``events.py``): the event
        is the payload's type."""

    @contextmanager
    def at_step(self, step: int) -> Iterator[None]:
        """Events recorded inside belong to engine step ``step``; after it, to the step before (or none)."""
        outer, self.step = self.step, step
        try:
            yield
        finally:
            self.step = outer

    @contextmanager
    def flushing_deferred(self) -> Iterator[None]:
        """Steps inside a run of many (``generate``): their lines may reach a trace file up to
        ``FLUSH_SECONDS`` after they end; everything is on disk when the block ends."""
        yield

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Nothing recorded inside (the warm-up, say): ``enabled`` is False until the block ends."""
        was, self.enabled = self.enabled, False
        try:
            yield
        finally:
            self.enabled = was

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
    ``validate``: check every event against the contract as it is emitted (a ``ContractError`` names the
    event and field); for tests of emit sites, off by default.
    ``stopped_by``: the error that stopped recording (see the module's policy), or None.
    """

    def __init__(self, path: str | Path | None = None, *, keep_in_memory: bool = True,
                 detail_decode_steps: int = 3, detail_max_elements: int = 4096,
                 sinks: list[Callable[[TraceEvent], None]] | None = None, validate: bool = False) -> None:
        self.path = Path(path) if path is not None else None
        self.keep_in_memory = keep_in_memory
        self.detail_decode_steps = detail_decode_steps
        self.detail_max_elements = detail_max_elements
        self.sinks = list(sinks or [])
        self.validate = validate
        self.enabled = True
        self.header: dict[str, Any] | None = None
        self.events: list[TraceEvent] = []
        self.step = None
        self.stopped_by: BaseException | None = None
        self._file: IO[bytes] | None = None
        self._temp: Path | None = None  # the file being written, until it is moved to ``path``
        self._discard: weakref.finalize | None = None
        self._next_i = 0
        self._clock: Callable[[], int] = time.perf_counter_ns
        self._t0 = self._clock()
        self._decode_details = 0
        self._pending: list[TraceEvent] = []  # this step's events, not yet written
        self._flushed_at = time.monotonic()
        self._deferring = False  # inside flushing_deferred()

    def set_clock(self, clock: Callable[[], int]) -> None:
        self._clock = clock
        self._t0 = clock()

    def open(self, header: dict[str, Any]) -> None:
        self.header = _plain(header)
        self._t0 = self._clock()
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._temp = self.path.with_name(f".{self.path.name}.{os.getpid()}-{id(self):x}.partial")
        self._file = self._temp.open("xb", buffering=WRITE_BUFFER_BYTES)
        # A recorder dropped before ENGINE_READY or close() (an engine that failed to start) leaves no file.
        self._discard = weakref.finalize(self, _remove_quietly, self._file, self._temp)
        self._write(self.header)

    def record(self, phase: str, reason: str, payload: Payload, /) -> None:
        if not self.enabled:
            return
        event = payload.event
        if event not in _KNOWN_EVENTS or phase not in _KNOWN_PHASES:
            raise ValueError(say(UNKNOWN_EVENT, event=event, phase=phase))
        if event in TENSOR_EVENTS:
            plain = self._tensor_stats(event, payload)
        else:
            # One C call: field names as the file spells them, absent fields left out, every list copied
            # (the engine may change its own lists after the event), anything else made plain by ``_plain``.
            plain = msgspec.to_builtins(payload, enc_hook=_plain)
        if self.validate:
            check_payload(event, plain)  # raises ContractError naming the event and field
        record = TraceEvent(self._next_i, self._clock() - self._t0, event, phase, self.step,
                            reason, plain)
        self._next_i += 1
        if self.keep_in_memory:
            self.events.append(record)
        try:
            if self._file is not None and self.step is not None:
                self._pending.append(record)  # written with the rest of its step, when the step ends
            elif self._file is not None:
                self._write(record)
                if event == "ENGINE_READY":
                    self._publish()
            for sink in self.sinks:
                sink(record)
        except Exception as error:  # KeyboardInterrupt and other BaseExceptions propagate
            self._stop(error)

    def _tensor_stats(self, event: str, payload: Payload) -> dict[str, Any]:
        """A tensor field ``x`` becomes ``x_shape``, and ``x`` itself while the detail budget lasts."""
        detailed = event == "PREPARE_PREFILL_TENSORS" or self._decode_details < self.detail_decode_steps
        if event == "PREPARE_DECODE_TENSORS" and detailed:
            self._decode_details += 1
        out: dict[str, Any] = {}
        # The struct's fields read directly, not through ``Payload.items``: this runs at every decode step.
        for attr, key in zip(payload.__struct_fields__, payload.__struct_encode_fields__):
            value = getattr(payload, attr)
            if value is UNSET:
                continue
            if not _is_tensor(value):
                out[key] = _plain(value)
                continue
            out[f"{key}_shape"] = shape = list(value.shape)
            if detailed and math.prod(shape) <= self.detail_max_elements:
                out[key] = value.tolist()
        return out

    @contextmanager
    def flushing_deferred(self) -> Iterator[None]:
        was, self._deferring = self._deferring, True
        try:
            yield
        finally:
            self._deferring = was
            if self._file is not None and not was:
                try:
                    self._flush()
                except OSError as error:
                    self._stop(error)

    @contextmanager
    def at_step(self, step: int) -> Iterator[None]:
        # Recorder.at_step's bookkeeping written out here, not entered as a second context manager: this
        # runs every step, and with recording on each microsecond is ~0.03% of a step of the shipped model.
        outer, self.step = self.step, step
        try:
            yield
        except BaseException:
            self._write_step(flush=True)
            raise
        finally:
            self.step = outer
        self._write_step()

    def _write(self, obj: dict[str, Any] | TraceEvent) -> None:
        """One line outside a step (the header, start-up events), flushed at once."""
        # Compact UTF-8 JSON: the encoder writes a TraceEvent's fields in declaration order.
        self._file.write(_ENCODER.encode(obj) + b"\n")
        self._flush()

    def _flush(self) -> None:
        self._file.flush()
        self._flushed_at = time.monotonic()

    def _write_step(self, flush: bool = False) -> None:
        """A step's events reach the file together: encoded in one call, written and flushed once (while
        ``flushing_deferred``: flushed when ``flush`` or when the last flush is ``FLUSH_SECONDS`` old). Done
        between steps, not at each event, because an event comes right after the model's arithmetic has
        pushed the recorder's data out of the processor's caches: there, writing one line took several
        times as long as it does here. Flushing is a system call, which took 20 us on a 2-core VM: a step
        of the shipped model on a CPU takes 3 ms, so flushing at every step of ``generate`` cost 0.7%."""
        pending, self._pending = self._pending, []
        if self._file is None or not pending:
            return
        try:
            self._file.write(_ENCODER.encode_lines(pending))
            if flush or not self._deferring or time.monotonic() - self._flushed_at >= FLUSH_SECONDS:
                self._flush()
        except OSError as error:
            self._stop(error)

    def _publish(self) -> None:
        """Move the file being written to ``path`` (replacing what was there): the engine has started."""
        if self._temp is not None:
            os.replace(self._temp, self.path)
            self._temp = None
            self._discard.detach()

    def _stop(self, error: Exception) -> None:
        self.enabled = False
        self.stopped_by = error
        said = {"i": self._next_i - 1, "kind": type(error).__name__, "error": error}
        message = say(STOPPED, **said) if self.path is None else say(STOPPED_KEEPS_FILE, path=self.path, **said)
        warnings.warn(message, RecordingStopped, stacklevel=3)
        try:
            self.close()
        except OSError:
            pass  # the file could not take its last bytes either

    def close(self) -> None:
        if self._file is None:
            return
        file, self._file = self._file, None
        pending, self._pending = self._pending, []
        try:
            if pending:  # a step stopped by a failing sink: what it recorded before still reaches the file
                file.write(_ENCODER.encode_lines(pending))
            file.close()
        finally:
            self._publish()


def _remove_quietly(file: IO[bytes], temp: Path) -> None:
    try:
        file.close()
    except OSError:
        pass
    temp.unlink(missing_ok=True)


def make_recorder(trace: "str | Path | Recorder | None") -> Recorder:
    """What ``LLM(trace=...)`` accepts: a path (record to that JSONL file), a recorder, or None (off)."""
    if trace is None:
        return NullRecorder()
    if isinstance(trace, Recorder):
        return trace
    if isinstance(trace, (str, Path)):
        return TraceRecorder(trace)
    raise TypeError(say(NOT_A_TRACE, kind=type(trace).__name__))
