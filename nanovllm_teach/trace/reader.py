"""Reading a TEACHING trace back: the JSONL file (or a live recorder) becomes a ``Trace``.

Part of the torch-free trace layer (the standard library and msgspec), so a trace recorded on a GPU
replays on a laptop that has no torch. Loading never executes anything from the file: each line is parsed
as JSON by msgspec (a C parser that checks each event field's type while it parses, about three times
faster than the standard library's ``json`` on a large trace) and nothing else.

File format (written by ``TraceRecorder``): line 1 is the header (``schema``, ``version``, config, model,
device, versions, ...); every following line is one event ``{"i", "t_ns", "event", "phase", "step",
"reason", "stats"}`` with ``i`` dense from 0.

A crashed run leaves a trace whose last line may be cut short. ``load_trace(path, strict=False)`` keeps
everything up to the first bad line and warns, so such a trace still replays; the default ``strict=True``
refuses it with a ``TraceFormatError`` naming the file and line.
"""

from __future__ import annotations

import gc
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

import msgspec

from nanovllm_teach.trace.schema import SCHEMA_NAME, SCHEMA_VERSION, TraceEvent

if TYPE_CHECKING:  # tables imports this module; the annotations only need the names
    from nanovllm_teach.trace.recorder import TraceRecorder
    from nanovllm_teach.trace.tables import RequestRow, StepRow


class TraceFormatError(ValueError):
    """A trace file that cannot be read. ``path`` and ``line`` (1-based) say where."""

    def __init__(self, path: str | Path, line: int, problem: str) -> None:
        self.path = str(path)
        self.line = line
        self.problem = problem
        super().__init__(f"{self.path}, line {line}: {problem}")


# One decoder, built once: it knows TraceEvent's fields and their types (``bool`` is not accepted as an
# ``int``: ``True`` is not an event index).
_EVENT_DECODER = msgspec.json.Decoder(TraceEvent)


@dataclass(eq=False)
class Trace:
    """A loaded trace: the header, the events in order, and the tables derived from them.

    ``steps`` and ``requests`` are computed on first use from the events alone (see ``tables``).
    """

    header: dict[str, Any]
    events: list[TraceEvent]
    path: Path | None = None
    _by_step: dict[int, list[TraceEvent]] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        for event in self.events:
            if event.step is not None:
                self._by_step.setdefault(event.step, []).append(event)

    @classmethod
    def from_recorder(cls, recorder: "TraceRecorder") -> "Trace":
        """The trace a live ``TraceRecorder`` holds in memory (a copy: recording may go on)."""
        if not recorder.keep_in_memory:
            raise ValueError("this recorder does not keep events in memory (keep_in_memory=False); "
                             "load its file with load_trace() instead")
        return cls(dict(recorder.header or {}), list(recorder.events), recorder.path)

    @cached_property
    def steps(self) -> list["StepRow"]:
        """One row per completed engine step (a step with a STEP_DONE event), in step order."""
        from nanovllm_teach.trace.tables import step_table
        with _gc_paused():
            return step_table(self)

    @cached_property
    def requests(self) -> list["RequestRow"]:
        """One row per request (a REQUEST_ENQUEUE event), in seq_id order."""
        from nanovllm_teach.trace.tables import request_table
        with _gc_paused():
            return request_table(self)

    def events_in_step(self, step: int) -> list[TraceEvent]:
        """Every event recorded during engine step ``step``, in order."""
        return list(self._by_step.get(step, []))

    def events_named(self, *names: str) -> list[TraceEvent]:
        """The events whose ``event`` is one of ``names``, in order."""
        wanted = set(names)
        return [e for e in self.events if e.event in wanted]


def load_trace(path: str | Path, *, strict: bool = True) -> Trace:
    """Read a JSONL trace file.

    Raises ``TraceFormatError`` (a ``ValueError``) naming the file and the 1-based line for: a missing or
    foreign header, a schema version newer than this reader, a line that is not JSON or not an event, an
    event index out of sequence, a truncated last line. With ``strict=False`` the problems *after* the
    header instead end the trace there: the valid prefix is returned and a warning names the line.
    """
    path = Path(path)
    with path.open("rb") as f:
        data = f.read()
    # A file that ends with a newline has no line after it.
    ends_with_newline = data.endswith(b"\n")
    if ends_with_newline:
        data = data[:-1]
    if not data and not ends_with_newline:
        raise TraceFormatError(path, 1, "empty file: expected a trace header line")
    header_end = data.find(b"\n")
    header_line, body = (data, b"") if header_end < 0 else (data[:header_end], data[header_end + 1:])
    header = _parse_header(path, header_line, is_last=header_end < 0 and not ends_with_newline)
    del data  # the body is a copy: keep at most one copy of a large file around

    with _gc_paused():
        events = _parse_events_at_once(body, has_lines=header_end >= 0)
        if events is None:  # some line is not a well-formed event: read line by line to say which
            events = []
            raw_lines = body.split(b"\n")
            for index, raw in enumerate(raw_lines):
                line_no = index + 2
                is_last = index == len(raw_lines) - 1
                try:
                    events.append(_parse_event(path, line_no, raw, expected_i=len(events),
                                               truncated=is_last and not ends_with_newline))
                except TraceFormatError as error:
                    if strict:
                        raise
                    warnings.warn(f"{error}; keeping the {len(events)} events before it", stacklevel=2)
                    break
        return Trace(header, events, path)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building millions of small objects.

    Every few hundred new containers CPython runs a collection, which walks all the (young, then old)
    objects; a large trace makes millions of dicts and lists and none of them forms a cycle, so those
    walks only cost time (about a third of a large load). Reference counting still frees everything.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _parse_events_at_once(body: bytes, has_lines: bool) -> list[TraceEvent] | None:
    """The fast path: every event line (``body``, newline-separated) decoded straight into ``TraceEvent``
    records by msgspec, which checks each field's type as it parses.

    Returns None, without saying why, unless every line is exactly one well-formed event in order (one
    record per line, indices dense from 0); the caller then reads the lines one by one, which names the
    first bad line.
    """
    if not has_lines:
        return []
    try:
        events = _EVENT_DECODER.decode_lines(body)
    except msgspec.MsgspecError:
        return None
    # decode_lines skips blank lines, which the format does not allow: count the lines to catch them.
    if len(events) != body.count(b"\n") + 1:
        return None
    for expected, event in enumerate(events):
        if event.i != expected:
            return None
    return events


def _decode(path: Path, line_no: int, raw: bytes, truncated: bool) -> Any:
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError as error:
        if truncated:
            problem = "truncated last line (the run probably stopped while writing it)"
        else:
            problem = f"not valid JSON ({error})"
        raise TraceFormatError(path, line_no, problem) from None


def _parse_header(path: Path, raw: bytes, is_last: bool) -> dict[str, Any]:
    header = _decode(path, 1, raw, truncated=is_last)
    if not isinstance(header, dict):
        raise TraceFormatError(path, 1, f"expected a header object, got {type(header).__name__}")
    if "event" in header and "schema" not in header:
        raise TraceFormatError(path, 1, "missing header: the first line is an event; "
                                        "a trace file starts with its header line")
    schema = header.get("schema")
    if schema != SCHEMA_NAME:
        raise TraceFormatError(path, 1, f"unknown schema {schema!r}: expected {SCHEMA_NAME!r}")
    version = header.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise TraceFormatError(path, 1, f"header version must be a positive int, got {version!r}")
    if version > SCHEMA_VERSION:
        raise TraceFormatError(path, 1, f"schema version {version} is newer than this reader understands "
                                        f"({SCHEMA_VERSION}); upgrade nanovllm_teach to replay it")
    return header


def _parse_event(path: Path, line_no: int, raw: bytes, expected_i: int, truncated: bool) -> TraceEvent:
    obj = _decode(path, line_no, raw, truncated)
    if not isinstance(obj, dict):
        raise TraceFormatError(path, line_no, f"expected an event object, got {type(obj).__name__}")
    try:
        # Fields added by newer writers of the same schema version are allowed and not kept.
        event = msgspec.convert(obj, TraceEvent)
    except msgspec.ValidationError as error:
        raise TraceFormatError(path, line_no, f"not an event ({error})") from None
    if event.i != expected_i:
        raise TraceFormatError(path, line_no, f"event index i={event.i}, expected {expected_i} "
                                              "(events are numbered densely from 0)")
    return event
