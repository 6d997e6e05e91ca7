"""TEACHING traces: the event schema, the recorder the engine writes to, and readers that replay a trace.

Nothing in ``nanovllm_teach.trace`` imports torch: a trace recorded on a GPU replays on a laptop that has
only the trace and viz dependencies.
"""

from nanovllm_teach.trace.console import ConsoleRenderer, VERBOSITIES, format_event, render_trace
from nanovllm_teach.trace.diff import VOLATILE, Divergence, diff_traces
from nanovllm_teach.trace.perfetto import to_chrome_trace, write_chrome_trace
from nanovllm_teach.trace.reader import Trace, TraceFormatError, load_trace
from nanovllm_teach.trace.reasons import LANGS, explain
from nanovllm_teach.trace.recorder import NullRecorder, Recorder, TraceRecorder, make_recorder
from nanovllm_teach.trace.schema import EVENTS, PHASES, SCHEMA_NAME, SCHEMA_VERSION, TraceEvent
from nanovllm_teach.trace.tables import (
    RequestRow, RequestSpan, StepRow, check_consistency, format_request_table, format_step_table, replay_blocks,
    request_spans,
)

__all__ = [
    "EVENTS", "LANGS", "PHASES", "SCHEMA_NAME", "SCHEMA_VERSION", "VERBOSITIES", "VOLATILE", "ConsoleRenderer",
    "Divergence", "NullRecorder", "Recorder", "RequestRow", "RequestSpan", "StepRow", "Trace", "TraceEvent",
    "TraceFormatError", "TraceRecorder", "check_consistency", "diff_traces", "explain", "format_event",
    "format_request_table", "format_step_table", "load_trace", "make_recorder", "render_trace", "replay_blocks",
    "request_spans", "to_chrome_trace", "write_chrome_trace",
]
