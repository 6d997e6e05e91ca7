"""The TEACHING event contract: one record type per event, each field with its type, unit and meaning.

Part of the torch-free trace layer (msgspec only). Every line of a trace file is one event
``{"i", "t_ns", "event", "phase", "step", "reason", "stats"}``; ``stats`` is the event's payload, one of the
``Payload`` types in ``PAYLOADS``, chosen by ``event``. ``load_trace`` checks every payload against its type,
the recorder does on request (``TraceRecorder(validate=True)``), and ``docs/trace-format.md`` is generated
from these declarations (``python -m nanovllm_teach.trace.docs``).

A field is declared with ``Field(type, meaning, unit=..., volatile=...)``. *Volatile* fields say how this
machine ran (clocks, memory, device, paths), not what the engine decided: ``diff_traces`` ignores them.
A field that is ``| UnsetType = UNSET`` may be absent (newer fields, which older traces lack, and tensor
values the recorder's detail budget dropped); an absent field is not a key of the payload.

Each event's class also says what the event *means*, in class attributes above its fields (the defaults
are in ``payload.Payload``): ``changes_state`` (the state interpreter, ``state.py``, applies it),
``decision`` (a scheduling or block decision: ``diff_decisions`` compares these), ``acts_on_sequence``
(done to one sequence or its blocks), ``carries_tensors``, ``shown_from`` (the least console verbosity that
prints it), ``actor`` (whose work it reports: ``LAYERS`` gives the class's layer),
and ``done``, what the engine did, as the verb phrase diff's sentences are made of: a ``Text`` of the
event's fields in both languages, which ``did`` says. Every reader asks the class; ``events_where`` lists
the events that share a meaning.

The records are declared by the phase that emits them: ``events_startup.py`` (the engine's start-up),
``events_run.py`` (generate() calls, requests, each step's end), ``events_scheduling.py`` (scheduling and
the KV cache's blocks) and ``events_execution.py`` (the model runner's step); their building blocks are in
``payload.py``. This module gathers them into ``PAYLOADS``, the one list of the events, and is where every
reader imports a record from.

Adding a field: one ``Field`` line in its event's record plus the emit site. Adding an event: one ``Payload``
class in the module of its phase (with what it means), its entry in ``PAYLOADS``, its reason sentences in
``reasons.py``, one emit line, and a case in ``state.py`` if it changes state.
"""

from typing import Any, Callable

import msgspec

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.trace.events_execution import (
    CudagraphReplay, PrepareDecodeTensors, PreparePrefillTensors, RunModel, Sample,
)
from nanovllm_teach.trace.events_run import GenerateFinish, GenerateStart, RequestAbort, RequestEnqueue, StepDone
from nanovllm_teach.trace.events_scheduling import (
    BlockAllocate, BlockFree, Preempt, PrefixCacheHit, ScheduleDecode, SchedulePrefill, StateTransition,
)
from nanovllm_teach.trace.events_startup import (
    CudagraphCapture, DecodeCompile, EngineInit, EngineReady, KvBudgetEstimate, ModelWeightsLoaded, TpRuntimeInit,
    Warmup,
)
from nanovllm_teach.trace.payload import ContractError, Payload, explain_error, field_meta

NOT_AN_EVENT = Text(en="unknown event (the events are {names})", zh="未知的事件（已有的事件：{names}）")

# Every event, in the order a run emits them, with its payload type.
PAYLOADS: dict[str, type[Payload]] = {
    "ENGINE_INIT": EngineInit, "TP_RUNTIME_INIT": TpRuntimeInit, "MODEL_WEIGHTS_LOADED": ModelWeightsLoaded,
    "WARMUP": Warmup, "KV_BUDGET_ESTIMATE": KvBudgetEstimate, "CUDAGRAPH_CAPTURE": CudagraphCapture,
    "DECODE_COMPILE": DecodeCompile, "ENGINE_READY": EngineReady, "GENERATE_START": GenerateStart, "GENERATE_FINISH": GenerateFinish,
    "REQUEST_ENQUEUE": RequestEnqueue, "SCHEDULE_PREFILL": SchedulePrefill, "SCHEDULE_DECODE": ScheduleDecode,
    "PREFIX_CACHE_HIT": PrefixCacheHit, "BLOCK_ALLOCATE": BlockAllocate, "BLOCK_FREE": BlockFree,
    "PREEMPT": Preempt, "PREPARE_PREFILL_TENSORS": PreparePrefillTensors,
    "PREPARE_DECODE_TENSORS": PrepareDecodeTensors, "RUN_MODEL": RunModel, "CUDAGRAPH_REPLAY": CudagraphReplay,
    "SAMPLE": Sample, "STATE_TRANSITION": StateTransition, "STEP_DONE": StepDone, "REQUEST_ABORT": RequestAbort,
}
for _name, _cls in PAYLOADS.items():
    _cls.event = _name
EVENTS = tuple(PAYLOADS)


def events_where(means: Callable[[type[Payload]], bool]) -> tuple[str, ...]:
    """The events whose payload type ``means`` holds for, in ``EVENTS`` order:
    ``events_where(lambda p: p.changes_state)``."""
    return tuple(name for name, cls in PAYLOADS.items() if means(cls))


def check_payload(event: str, stats: dict[str, Any]) -> Payload:
    """``stats`` as ``event``'s typed payload; a ContractError names the unknown event, or the first field
    that is missing, unknown or of the wrong type."""
    cls = PAYLOADS.get(event)
    if cls is None:
        raise ContractError(event, None, say(NOT_AN_EVENT, names=", ".join(EVENTS)))
    try:
        return msgspec.convert(stats, cls)
    except msgspec.ValidationError as error:
        raise explain_error(event, error) from None


def volatile_fields() -> list[str]:
    """``EVENT.field`` for every payload field declared volatile."""
    return [f"{event}.{name}" for event, cls in PAYLOADS.items()
            for name, _, meta, _ in field_meta(cls) if meta is not None and meta.extra.get("volatile")]
