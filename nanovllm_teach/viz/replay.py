"""Where the engine-state replay used to live; it is now part of the trace layer (``nanovllm_teach.trace``:
``state``, ``replay``, ``segments``). Kept only so that ``from nanovllm_teach.viz.replay import
held_segments`` in existing notebooks still works: import from ``nanovllm_teach.viz`` or
``nanovllm_teach.trace`` instead.
"""

from nanovllm_teach.trace.replay import EngineReplay, KVSnapshot, Queues, kv_snapshot, queues
from nanovllm_teach.trace.segments import Segment, StaticBatch, held_segments, request_segments, static_batches
from nanovllm_teach.trace.state import STATE_EVENTS, EngineSettings, EngineState

__all__ = ["STATE_EVENTS", "EngineReplay", "EngineSettings", "EngineState", "KVSnapshot", "Queues", "Segment",
           "StaticBatch", "held_segments", "kv_snapshot", "queues", "request_segments", "static_batches"]
