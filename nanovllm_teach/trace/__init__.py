"""TEACHING traces: the event schema, the recorder the engine writes to, and readers that replay a trace.

Nothing in ``nanovllm_teach.trace`` imports torch: a trace recorded on a GPU replays on a laptop that has
only the trace and viz dependencies.
"""

from nanovllm_teach.trace.recorder import NullRecorder, Recorder, TraceRecorder, make_recorder
from nanovllm_teach.trace.schema import EVENTS, PHASES, SCHEMA_NAME, SCHEMA_VERSION, TraceEvent

__all__ = [
    "EVENTS", "PHASES", "SCHEMA_NAME", "SCHEMA_VERSION", "NullRecorder", "Recorder", "TraceEvent",
    "TraceRecorder", "make_recorder",
]
