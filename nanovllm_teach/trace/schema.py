"""The TEACHING event contract (see DESIGN.md): names, phases and the record every event is.

Field names here are shared by the engine, the trace files and the widgets. Add fields freely; renaming or
dropping one requires bumping ``SCHEMA_VERSION``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

SCHEMA_NAME = "nanovllm_teach.trace"
SCHEMA_VERSION = 1

PHASES = ("bootstrap", "init", "ingress", "prefill", "decode", "postprocess", "egress")

EVENTS = (
    "ENGINE_INIT", "TP_RUNTIME_INIT", "MODEL_WEIGHTS_LOADED", "WARMUP", "KV_BUDGET_ESTIMATE",
    "CUDAGRAPH_CAPTURE", "ENGINE_READY", "GENERATE_START", "GENERATE_FINISH", "REQUEST_ENQUEUE",
    "SCHEDULE_PREFILL", "SCHEDULE_DECODE", "PREFIX_CACHE_HIT", "BLOCK_ALLOCATE", "BLOCK_FREE", "PREEMPT",
    "PREPARE_PREFILL_TENSORS", "PREPARE_DECODE_TENSORS", "RUN_MODEL", "CUDAGRAPH_REPLAY", "SAMPLE",
    "STATE_TRANSITION", "STEP_DONE", "REQUEST_ABORT",
)

# Events whose stats carry tensors: the recorder keeps their shapes always and their values only while the
# detail budget lasts (the seed's "decode 详单#1/3").
TENSOR_EVENTS = frozenset({"PREPARE_PREFILL_TENSORS", "PREPARE_DECODE_TENSORS"})


@dataclass(slots=True)
class TraceEvent:
    i: int
    t_ns: int
    event: str
    phase: str
    step: int | None
    reason: str
    stats: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
