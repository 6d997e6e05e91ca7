"""Reading a TEACHING trace back: the JSONL file (or a live recorder) becomes a ``Trace``.

Part of the torch-free trace layer (the standard library and msgspec), so a trace recorded on a GPU
replays on a laptop that has no torch. Loading never executes anything from the file: each line is parsed
by msgspec straight into its event's typed record (``events.py``), which checks every field's type as it
parses, and nothing else.

File format (written by ``TraceRecorder``, described in ``docs/trace-format.md``): line 1 is the header
(``schema``, ``version``, config, model, device, versions, ...); every following line is one event
``{"i", "t_ns", "event", "phase", "step", "reason", "stats"}`` with ``i`` its position (dense from 0).
Version-1 traces (the same events, without the fields version 2 added) load too.

A line that breaks the format (not JSON, a truncated last line, an unknown event or phase, a payload field
missing, unknown or of the wrong type, an index out of place) is refused by ``load_trace(path)`` with a
``TraceFormatError`` naming the file, the line, the event and the field. ``load_trace(path,
strict=False)`` instead skips such lines with one warning, so a crashed run's trace still replays.
"""

from __future__ import annotations

import gc
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Union

import msgspec

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.trace.events import PAYLOADS, check_payload
from nanovllm_teach.trace.payload import ContractError, Count, Payload, explain_error
from nanovllm_teach.trace.schema import READABLE_VERSIONS, SCHEMA_NAME, SCHEMA_VERSION, Phase, TraceEvent
from nanovllm_teach.trace.state import EngineSettings, read_settings
from nanovllm_teach.trace.tables import Tables, derive_tables

if TYPE_CHECKING:
    from nanovllm_teach.trace.recorder import TraceRecorder
    from nanovllm_teach.trace.tables import RequestRow, RequestSpan, StepRow

# A trace file may come from anyone: each refusal says where (the file and the line) and what is wrong.
AT_LINE = Text(en="{path}, line {line}: {problem}", zh="{path} 第 {line} 行：{problem}")
IS_A_FOLDER = Text(en="is a folder, not a trace file", zh="是文件夹，不是 trace 文件")
EMPTY_FILE = Text(en="empty file: expected a trace header line", zh="空文件：应当以 trace 头部行开头")
TOO_DEEP = Text(en="nested too deeply to be a trace line (the JSON decoder gave up before reaching its end)",
                zh="嵌套太深，不可能是 trace 行（JSON 解码器没读到结尾就放弃了）")
NOT_A_LINE = Text(en="not a trace line ({why})", zh="不是 trace 行（{why}）")
TRUNCATED = Text(en="truncated last line (the run probably stopped while writing it)",
                 zh="最后一行被截断（运行很可能是在写这一行时停止的）")
NOT_JSON = Text(en="not valid JSON ({why})", zh="不是合法的 JSON（{why}）")
HEADER_NOT_OBJECT = Text(en="expected a header object, got {kind}", zh="应当是头部对象，收到的是 {kind}")
HEADER_TOO_DEEP = Text(en="the header nests {depth} levels deep; a trace header nests at most {limit}",
                       zh="头部嵌套了 {depth} 层；trace 头部最多嵌套 {limit} 层")
NO_HEADER = Text(en="missing header: the first line is an event; a trace file starts with its header line",
                 zh="缺少头部：第一行是事件；trace 文件应以头部行开头")
UNKNOWN_SCHEMA = Text(en="unknown schema {schema!r}: expected {expected!r}",
                      zh="未知的 schema {schema!r}：应当是 {expected!r}")
BAD_VERSION = Text(en="header version must be a positive int, got {version!r}",
                   zh="头部的 version 必须是正整数，收到的是 {version!r}")
NEWER_VERSION = Text(en="schema version {version} is newer than this reader understands ({known}); upgrade "
                        "nanovllm_teach to replay it",
                     zh="schema 版本 {version} 比这个读取器能理解的版本（{known}）更新；请升级 nanovllm_teach 再回放它")
OLD_VERSION = Text(en="schema version {version} is no longer read; re-record the trace (nanovllm-teach record --all "
                      "--out-dir traces re-records the shipped ones)",
                   zh="schema 版本 {version} 已不再支持读取；请重新录制这个 trace（nanovllm-teach record --all "
                      "--out-dir traces 会重新录制自带的 trace）")
UNKNOWN_EVENT = Text(en="unknown event {name!r}", zh="未知的事件 {name!r}")
LINE_FIELD = Text(en="{name} event, line field {field!r}: {why}", zh="{name} 事件的行字段 {field!r}：{why}")
BAD_INDEX = Text(en="event index i={i}, expected {expected} (events are numbered densely from 0)",
                 zh="事件序号 i={i}，应当是 {expected}（事件从 0 开始连续编号）")
SKIPPED_ONE = Text(en="{first}; skipped that line, keeping the {before} events before it and the {after} after it",
                   zh="{first}；已跳过这一行，保留了它之前的 {before} 个事件和之后的 {after} 个")
SKIPPED_MANY = Text(en="{first}; skipped that line and {more} more, keeping the {before} events before it and the "
                       "{after} after it",
                    zh="{first}；已跳过这一行和另外 {more} 行，保留了第一处之前的 {before} 个事件和之后的 {after} 个")
NOT_IN_MEMORY = Text(en="this recorder does not keep events in memory (keep_in_memory=False); load its file with "
                        "load_trace() instead",
                     zh="这个 recorder 不在内存中保留事件（keep_in_memory=False）；请改用 load_trace() 读取它的文件")


class TraceFormatError(ValueError):
    """A trace file that cannot be read. ``path`` and ``line`` (1-based) say where; ``event`` and ``field``
    which event and payload field broke the contract (None when the line is not an event at all)."""

    def __init__(self, path: str | Path, line: int, problem: str, event: str | None = None,
                 field: str | None = None) -> None:
        self.path = str(path)
        self.line = line
        self.problem = problem
        self.event = event
        self.field = field
        super().__init__(say(AT_LINE, path=self.path, line=line, problem=problem))


class _Line(msgspec.Struct, tag_field="event"):
    """An event line as the file holds it; each event's subclass types ``stats`` with its payload."""

    i: Count
    t_ns: int
    phase: Phase
    step: Count | None
    reason: str
    stats: Any


class _Name(msgspec.Struct):
    """Just the event name of a line (the rest is skipped, not checked), to say which event is bad."""

    event: Any = None


# One line type per event, tagged by the event name: one decoder, built once, types every line in C
# (``bool`` is not accepted as an ``int``: ``True`` is not an event index).
_LINE_TYPES = tuple(msgspec.defstruct(f"{cls.__name__}Line", [("stats", cls)], bases=(_Line,), tag=name)
                    for name, cls in PAYLOADS.items())
_LINE_DECODER = msgspec.json.Decoder(Union[_LINE_TYPES])  # noqa: UP007 (a runtime union of many types)


@dataclass(eq=False)
class Trace:
    """A loaded trace: the header, the events in order, and the tables derived from them.

    ``steps``, ``requests`` and ``spans`` are computed together on first use from the events alone (see
    ``tables``). Events built by hand may carry their payload as a dict; it is checked against the
    contract (``events.py``) and typed here.
    """

    header: dict[str, Any]
    events: list[TraceEvent]
    path: Path | None = None
    _by_step: dict[int, list[TraceEvent]] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        for event in self.events:
            if not isinstance(event.stats, Payload):
                event.stats = check_payload(event.event, event.stats)
            if event.step is not None:
                self._by_step.setdefault(event.step, []).append(event)

    @classmethod
    def from_recorder(cls, recorder: "TraceRecorder") -> "Trace":
        """The trace a live ``TraceRecorder`` holds in memory (a copy: recording may go on)."""
        if not recorder.keep_in_memory:
            raise ValueError(say(NOT_IN_MEMORY))
        events = [TraceEvent(e.i, e.t_ns, e.event, e.phase, e.step, e.reason, e.stats) for e in recorder.events]
        return cls(dict(recorder.header or {}), events, recorder.path)

    @cached_property
    def settings(self) -> EngineSettings:
        """The engine settings the trace was recorded with (block size, number of blocks, policy, ...)."""
        return read_settings(self.header, self.events)

    @cached_property
    def _tables(self) -> Tables:
        with _gc_paused():
            return derive_tables(self.events, self.settings)

    @property
    def steps(self) -> list["StepRow"]:
        """One row per completed engine step (a step with a STEP_DONE event), in step order."""
        return self._tables.steps

    @property
    def requests(self) -> list["RequestRow"]:
        """One row per request (a REQUEST_ENQUEUE event), in seq_id order."""
        return self._tables.requests

    @property
    def spans(self) -> list["RequestSpan"]:
        """Every request's waiting / prefill / decode spans, in the order they close."""
        return self._tables.spans

    def events_in_step(self, step: int) -> list[TraceEvent]:
        """Every event recorded during engine step ``step``, in order."""
        return list(self._by_step.get(step, []))

    def events_named(self, *names: str) -> list[TraceEvent]:
        """The events whose ``event`` is one of ``names``, in order."""
        wanted = set(names)
        return [e for e in self.events if e.event in wanted]


def request_spans(trace: Trace) -> list["RequestSpan"]:
    """Every request's waiting / prefill / decode spans, in the order they close (``trace.spans``).

    A preempted request goes back to ``waiting`` at its PREEMPT and is prefilled again (recompute), so it
    can have several spans of each state. Spans still open when the trace ends close at its last event.
    """
    return trace.spans


def load_trace(path: str | Path, *, strict: bool = True) -> Trace:
    """Read a JSONL trace file.

    Raises ``TraceFormatError`` (a ``ValueError``) naming the file and the 1-based line for: a missing or
    foreign header, a schema version this reader does not know, a line that is not JSON or breaks the event
    contract (the message names the event and field: ``STEP_DONE.latency_ms: expected `float`, got
    `str```), an event index out of place, a truncated last line. With ``strict=False`` the bad event lines
    are skipped instead, with one warning that counts them and names the first.
    """
    path = Path(path)
    if path.is_dir():
        raise TraceFormatError(path, 1, say(IS_A_FOLDER))
    with path.open("rb") as f:
        data = f.read()
    # A file that ends with a newline has no line after it.
    ends_with_newline = data.endswith(b"\n")
    if ends_with_newline:
        data = data[:-1]
    if not data and not ends_with_newline:
        raise TraceFormatError(path, 1, say(EMPTY_FILE))
    header_end = data.find(b"\n")
    header_line, body = (data, b"") if header_end < 0 else (data[:header_end], data[header_end + 1:])
    header = _parse_header(path, header_line, is_last=header_end < 0 and not ends_with_newline)
    del data  # the body is a copy: keep at most one copy of a large file around

    with _gc_paused():
        lines = _parse_events_at_once(body, has_lines=header_end >= 0)
        if lines is None:  # some line breaks the format: read line by line to say which
            lines = _parse_line_by_line(path, body, ends_with_newline, strict)
        events = [TraceEvent(e.i, e.t_ns, e.__struct_config__.tag, e.phase, e.step, e.reason, e.stats)
                  for e in lines]
        return Trace(header, events, path)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building millions of small objects.

    Every few hundred new containers CPython runs a collection, which walks all the (young, then old)
    objects; a large trace makes millions of records and lists and none of them forms a cycle, so those
    walks only cost time. Reference counting still frees everything.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _parse_events_at_once(body: bytes, has_lines: bool) -> list[_Line] | None:
    """The fast path: every event line (``body``, newline-separated) decoded straight into its typed line
    record by msgspec, which checks each field's type as it parses.

    Returns None, without saying why, unless every line is exactly one well-formed event in its place (one
    record per line, indices dense from 0); the caller then reads the lines one by one, which names the
    first bad line.
    """
    if not has_lines:
        return []
    try:
        lines = _LINE_DECODER.decode_lines(body)
    except (msgspec.MsgspecError, RecursionError):
        return None
    # decode_lines skips blank lines, which the format does not allow: count the lines to catch them.
    if len(lines) != body.count(b"\n") + 1:
        return None
    for expected, line in enumerate(lines):
        if line.i != expected:
            return None
    return lines


def _parse_line_by_line(path: Path, body: bytes, ends_with_newline: bool, strict: bool) -> list[_Line]:
    lines: list[_Line] = []
    skipped: list[TraceFormatError] = []
    kept_before = 0  # events before the first skipped line
    raw_lines = body.split(b"\n")
    for index, raw in enumerate(raw_lines):
        try:
            lines.append(_parse_event(path, index + 2, raw, expected_i=index,
                                      truncated=index == len(raw_lines) - 1 and not ends_with_newline))
        except TraceFormatError as error:
            if strict:
                raise
            if not skipped:
                kept_before = len(lines)
            skipped.append(error)
    if skipped:
        counts = {"first": skipped[0], "before": kept_before, "after": len(lines) - kept_before}
        if len(skipped) > 1:
            warnings.warn(say(SKIPPED_MANY, more=len(skipped) - 1, **counts), stacklevel=3)
        else:
            warnings.warn(say(SKIPPED_ONE, **counts), stacklevel=3)
    return lines


# How deeply a header may nest (the recorder writes 2 levels): a hand-made trace nested thousands of levels
# deep would make every recursive reader after this one (diff, the page, the report) fail.
MAX_HEADER_DEPTH = 16


def _depth(value: Any) -> int:
    """How many levels of objects and arrays ``value`` nests (0 for a scalar), counted without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level + 1)
            stack.extend((child, level + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def _decode(path: Path, line_no: int, raw: bytes, truncated: bool, type: Any = Any) -> Any:
    try:
        return msgspec.json.decode(raw, type=type)
    except RecursionError:  # msgspec's own depth limit, raised in C before Python's stack is at risk
        raise TraceFormatError(path, line_no, say(TOO_DEEP)) from None
    except msgspec.ValidationError as error:  # valid JSON, but not an object (or a number out of range)
        raise TraceFormatError(path, line_no, say(NOT_A_LINE, why=error)) from None
    except msgspec.DecodeError as error:
        if truncated:
            problem = say(TRUNCATED)
        else:
            problem = say(NOT_JSON, why=error)
        raise TraceFormatError(path, line_no, problem) from None


def _parse_header(path: Path, raw: bytes, is_last: bool) -> dict[str, Any]:
    header = _decode(path, 1, raw, truncated=is_last)
    if not isinstance(header, dict):
        raise TraceFormatError(path, 1, say(HEADER_NOT_OBJECT, kind=type(header).__name__))
    if _depth(header) > MAX_HEADER_DEPTH:
        raise TraceFormatError(path, 1, say(HEADER_TOO_DEEP, depth=_depth(header), limit=MAX_HEADER_DEPTH))
    if "event" in header and "schema" not in header:
        raise TraceFormatError(path, 1, say(NO_HEADER))
    schema = header.get("schema")
    if schema != SCHEMA_NAME:
        raise TraceFormatError(path, 1, say(UNKNOWN_SCHEMA, schema=schema, expected=SCHEMA_NAME))
    version = header.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise TraceFormatError(path, 1, say(BAD_VERSION, version=version))
    if version > SCHEMA_VERSION:
        raise TraceFormatError(path, 1, say(NEWER_VERSION, version=version, known=SCHEMA_VERSION))
    if version not in READABLE_VERSIONS:
        raise TraceFormatError(path, 1, say(OLD_VERSION, version=version))
    return header


def _parse_event(path: Path, line_no: int, raw: bytes, expected_i: int, truncated: bool) -> _Line:
    name = _decode(path, line_no, raw, truncated, type=_Name).event
    if not isinstance(name, str) or name not in PAYLOADS:
        raise TraceFormatError(path, line_no, say(UNKNOWN_EVENT, name=name), event=str(name), field=None)
    try:
        # Keys added beside the event's fields by newer writers of the same version are not kept.
        line = _LINE_DECODER.decode(raw)
    except msgspec.ValidationError as error:
        problem = explain_error(name, error)
        field = problem.field or ""
        if field == "stats" or field.startswith(("stats.", "stats[")):  # a payload field: EVENT.field
            problem = ContractError(name, field[len("stats."):] or None, problem.problem)
            raise TraceFormatError(path, line_no, str(problem), event=name, field=problem.field) from None
        raise TraceFormatError(path, line_no, say(LINE_FIELD, name=name, field=field, why=problem.problem),
                               event=name, field=field) from None
    except msgspec.DecodeError as error:  # bad bytes inside a value the name check skipped over
        raise TraceFormatError(path, line_no, say(NOT_JSON, why=error), event=name) from None
    except RecursionError:
        raise TraceFormatError(path, line_no, say(TOO_DEEP), event=name) from None
    if line.i != expected_i:
        raise TraceFormatError(path, line_no, say(BAD_INDEX, i=line.i, expected=expected_i), event=name, field="i")
    return line
