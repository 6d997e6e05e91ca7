"""The trace file format: its name and version, the phases, the volatile header keys, and the record every
event line is (``TraceEvent``). Each event's payload type is in ``events.py``.

Part of the torch-free trace layer. ``docs/trace-format.md`` describes the format in full; it is generated
from this module and ``events.py`` (``python -m nanovllm_teach.trace.docs``).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from nanovllm_teach.trace.events import EVENTS, PAYLOADS, events_where
from nanovllm_teach.trace.payload import Payload

SCHEMA_NAME = "nanovllm_teach.trace"
# Version 2: every payload is typed (events.py). Version-1 traces carry the same fields (minus the newer,
# optional ones) and load as they are; ``nanovllm-teach record --all --out-dir traces`` re-records
# the shipped ones.
# Version 4: REQUEST_ENQUEUE may say how long before it the request arrived (``since_arrival_ms``); older
# traces load with each arrival at its enqueue.
SCHEMA_VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)

PHASES = ("bootstrap", "init", "ingress", "prefill", "decode", "postprocess", "egress")
Phase = Literal["bootstrap", "init", "ingress", "prefill", "decode", "postprocess", "egress"]

# Header keys (dotted into nested objects) that say how and where the trace was recorded, not what the
# engine decided: when, with which library versions, from which folder, on which device.
# config.model: version-1 traces recorded a machine path there; config.cpu_kvcache_gib: unset, it is sized from the
# memory this machine had available at start-up.
HEADER_VOLATILE = ("recorded_at", "versions", "device", "config.device", "config.attention_backend",
                   "config.linear_backend", "model.path", "config.model", "config.cpu_kvcache_gib")

# Events whose stats carry tensors: the recorder keeps their shapes always and their values only while the
# detail budget lasts.
TENSOR_EVENTS = frozenset(events_where(lambda payload: payload.carries_tensors))

__all__ = ["EVENTS", "HEADER_VOLATILE", "PAYLOADS", "PHASES", "READABLE_VERSIONS", "SCHEMA_NAME",
           "SCHEMA_VERSION", "TENSOR_EVENTS", "Phase", "TraceEvent"]


class TraceEvent(msgspec.Struct, gc=False):
    """One event: its index ``i`` (dense from 0), ``t_ns`` (ns since the trace began; volatile), ``event``
    (one of ``EVENTS``), ``phase`` (one of ``PHASES``), ``step`` (the engine step it happened in, None outside
    a step), ``reason`` (a key of ``reasons.REASONS``) and ``stats``: the event's payload, a typed ``Payload``
    in a ``Trace``, the plain dict the engine passed in a live recorder (both read as ``stats["key"]``).

    Not tracked by Python's cycle collector (``gc=False``): a recorder keeps every event, and each collection
    would walk them all again; an event never refers back to anything that refers to it, so it is in no
    cycle the collector would have to find."""

    i: int
    t_ns: int
    event: str
    phase: str
    step: int | None
    reason: str
    stats: Any = msgspec.field(default_factory=dict)  # a Payload, or a dict (see above)

    def to_dict(self) -> dict[str, Any]:
        stats = self.stats.to_dict() if isinstance(self.stats, Payload) else dict(self.stats)
        return {"i": self.i, "t_ns": self.t_ns, "event": self.event, "phase": self.phase, "step": self.step,
                "reason": self.reason, "stats": stats}
