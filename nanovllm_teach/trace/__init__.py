"""TEACHING traces: the event contract, the recorder the engine writes to, and readers that replay a trace.

Nothing in ``nanovllm_teach.trace`` imports torch: a trace recorded on a GPU replays on a laptop that has
only the trace and viz dependencies.

The layers, bottom up: ``events`` (one typed payload per event) and ``schema`` (the file format) ->
``recorder`` (writes events) and ``reader`` (loads them into a ``Trace``) -> ``state`` (the one interpreter
of events: the engine state after each one) -> ``tables``, ``consistency``, ``replay``, ``segments``,
``perfetto``, ``diff``, ``console`` (what is read from that state and those events).
"""

from nanovllm_teach.trace.console import ConsoleRenderer, VERBOSITIES, format_event, render_trace
from nanovllm_teach.trace.consistency import check_consistency
from nanovllm_teach.trace.diff import VOLATILE, Divergence, diff_traces
from nanovllm_teach.trace.diff import DECISION_EVENTS, diff_decisions
from nanovllm_teach.trace.events import PAYLOADS, check_payload
from nanovllm_teach.trace.payload import ContractError, Payload
from nanovllm_teach.trace.perfetto import to_chrome_trace, write_chrome_trace
from nanovllm_teach.trace.reader import Trace, TraceFormatError, load_trace, request_spans
from nanovllm_teach.trace.reasons import LANGS, explain
from nanovllm_teach.trace.recorder import NullRecorder, Recorder, RecordingStopped, TraceRecorder, make_recorder
from nanovllm_teach.trace.replay import EngineReplay, KVSnapshot, Queues, replay_blocks
from nanovllm_teach.trace.schema import EVENTS, PHASES, SCHEMA_NAME, SCHEMA_VERSION, TraceEvent
from nanovllm_teach.trace.segments import Segment, held_segments, request_segments
from nanovllm_teach.trace.state import EngineSettings, EngineState
from nanovllm_teach.trace.tables import (
    RequestRow, RequestSpan, StepRow, format_request_table, format_step_table,
)

__all__ = [
    "DECISION_EVENTS", "EVENTS", "LANGS", "PAYLOADS", "PHASES", "SCHEMA_NAME", "SCHEMA_VERSION", "VERBOSITIES",
    "VOLATILE",
    "ConsoleRenderer", "ContractError", "Divergence", "EngineReplay", "EngineSettings", "EngineState",
    "KVSnapshot", "NullRecorder", "Payload", "Queues", "Recorder", "RecordingStopped", "RequestRow",
    "RequestSpan", "Segment", "StepRow", "Trace", "TraceEvent", "TraceFormatError", "TraceRecorder",
    "check_consistency", "check_payload", "diff_decisions", "diff_traces", "explain", "format_event",
    "format_request_table",
    "format_step_table", "held_segments", "load_trace", "make_recorder", "render_trace", "replay_blocks",
    "request_segments", "request_spans", "to_chrome_trace", "write_chrome_trace",
]
