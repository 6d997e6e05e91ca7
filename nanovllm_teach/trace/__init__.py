"""TEACHING traces: the event contract, the recorder the engine writes to, and readers that replay a trace.

Nothing in ``nanovllm_teach.trace`` imports torch: a trace recorded on a GPU replays on a laptop that has
only the trace and viz dependencies.

The layers, bottom up: ``payload``, the ``events_*`` modules (one typed payload per event, saying what the
event means, grouped by the phase that emits it), ``events`` (gathers them into the one list of events) and
``schema`` (the file format) -> ``recorder`` (writes events) and ``reader`` (loads them into a
``Trace``) -> ``state`` (the one interpreter of events: the engine state after each one) and ``steps`` (the
one cut of a trace into steps) -> ``reasons``, ``tables``, ``consistency``, ``replay``, ``segments``,
``perfetto``, ``diff``, ``console`` (what is read from that state and those events).

Each name below is imported from its module on first use, so importing one module (the engine imports
``recorder``) loads only what that module needs.
"""

from importlib import import_module
from typing import Any

# public name -> the module that defines it
_HOME = {
    **dict.fromkeys(("ConsoleRenderer", "VERBOSITIES", "format_event", "render_trace"), "console"),
    **dict.fromkeys(("check_consistency",), "consistency"),
    **dict.fromkeys(("DECISION_EVENTS", "VOLATILE", "Divergence", "diff_decisions", "diff_traces"), "diff"),
    **dict.fromkeys(("PAYLOADS", "check_payload"), "events"),
    **dict.fromkeys(("ContractError", "Payload"), "payload"),
    **dict.fromkeys(("to_chrome_trace", "write_chrome_trace"), "perfetto"),
    **dict.fromkeys(("Trace", "TraceFormatError", "load_trace", "request_spans"), "reader"),
    **dict.fromkeys(("LANGS", "explain"), "reasons"),
    **dict.fromkeys(("NullRecorder", "Recorder", "RecordingStopped", "TraceRecorder", "make_recorder"),
                    "recorder"),
    **dict.fromkeys(("EngineReplay", "KVSnapshot", "Queues", "replay_blocks"), "replay"),
    **dict.fromkeys(("EVENTS", "PHASES", "SCHEMA_NAME", "SCHEMA_VERSION", "TraceEvent"), "schema"),
    **dict.fromkeys(("Segment", "held_segments", "request_segments"), "segments"),
    **dict.fromkeys(("EngineSettings", "EngineState"), "state"),
    **dict.fromkeys(("RequestRow", "RequestSpan", "StepRow", "format_request_table", "format_step_table"),
                    "tables"),
}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'nanovllm_teach.trace' has no attribute {name!r}")
    value = getattr(import_module(f"nanovllm_teach.trace.{module}"), name)
    globals()[name] = value  # found once: later look-ups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
