"""Export a trace to the Chrome trace-event JSON format, which Perfetto (ui.perfetto.dev) and
chrome://tracing open directly.

Part of the torch-free trace layer (standard library only). The request spans are the tables' (``Trace.spans``).

What the timeline shows:

- process "engine", track "engine steps": one complete slice ("X") per engine step, named ``prefill`` or
  ``decode``, its args the step's row (batch size, tokens, blocks, queues, finished, preempted); instant
  markers ("i") where each generate() call starts and finishes;
- process "engine", counters ("C"): ``batch_size`` and ``kv_blocks`` (used / free) per step;
- process "requests": one track per request with its ``waiting``, ``prefill`` and ``decode`` slices, and an
  instant marker at each preemption.

Timestamps and durations are microseconds (the format's unit) since the trace began.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nanovllm_teach.trace.reader import Trace

ENGINE_PID = 1
REQUESTS_PID = 2
ENGINE_TID = 1


def _us(t_ns: int) -> float:
    return round(t_ns / 1000, 3)


def _request_tid(seq_id: int) -> int:
    # tid 0 is avoided: some viewers treat it as "no thread".
    return seq_id + 1


def _metadata(kind: str, pid: int, tid: int, **args: str | int) -> dict[str, Any]:
    """A metadata ("M") event (``kind``: process_name, thread_name, *_sort_index): names and orders tracks."""
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "ts": 0, "args": args}


def to_chrome_trace(trace: "Trace") -> dict[str, Any]:
    """The trace as a Chrome trace-event JSON object: ``{"traceEvents": [...], ...}``."""
    events: list[dict[str, Any]] = [
        _metadata("process_name", ENGINE_PID, 0, name="engine"),
        _metadata("process_sort_index", ENGINE_PID, 0, sort_index=0),
        _metadata("thread_name", ENGINE_PID, ENGINE_TID, name="engine steps"),
        _metadata("process_name", REQUESTS_PID, 0, name="requests"),
        _metadata("process_sort_index", REQUESTS_PID, 0, sort_index=1),
    ]
    for row in trace.steps:
        events.append({
            "ph": "X", "name": row.phase, "cat": "step", "pid": ENGINE_PID, "tid": ENGINE_TID,
            "ts": _us(row.t_start_ns), "dur": _us(row.t_end_ns - row.t_start_ns),
            "args": {"step": row.step, "batch_size": row.batch_size, "seq_ids": row.seq_ids,
                     "num_batched_tokens": row.num_batched_tokens, "num_tokens_stat": row.num_tokens_stat,
                     "latency_ms": row.latency_ms, "used_blocks": row.used_blocks,
                     "free_blocks": row.free_blocks, "waiting_len": row.waiting_len,
                     "running_len": row.running_len, "finished": row.finished, "preempted": row.preempted,
                     "chunked": row.chunked, "num_cached_tokens": row.num_cached_tokens}})
        # A counter holds its value until the next sample: the batch size is set as the step starts,
        # the block usage as it ends (that is when STEP_DONE measured it).
        events.append({"ph": "C", "name": "batch_size", "pid": ENGINE_PID, "ts": _us(row.t_start_ns),
                       "args": {"batch_size": row.batch_size}})
        events.append({"ph": "C", "name": "kv_blocks", "pid": ENGINE_PID, "ts": _us(row.t_end_ns),
                       "args": {"used": row.used_blocks, "free": row.free_blocks}})
    for e in trace.events_named("GENERATE_START", "GENERATE_FINISH"):
        events.append({"ph": "i", "s": "t", "name": e.event.lower(), "cat": "generate", "pid": ENGINE_PID,
                       "tid": ENGINE_TID, "ts": _us(e.t_ns), "args": e.stats.to_dict()})

    for req in trace.requests:
        tid = _request_tid(req.seq_id)
        events.append(_metadata("thread_name", REQUESTS_PID, tid, name=f"seq {req.seq_id}"))
        events.append(_metadata("thread_sort_index", REQUESTS_PID, tid, sort_index=req.seq_id))
    for span in trace.spans:
        events.append({"ph": "X", "name": span.state, "cat": "request", "pid": REQUESTS_PID,
                       "tid": _request_tid(span.seq_id), "ts": _us(span.t_start_ns),
                       "dur": _us(span.t_end_ns - span.t_start_ns),
                       "args": {"seq_id": span.seq_id, "step_start": span.step_start, "step_end": span.step_end}})
    for e in trace.events_named("PREEMPT"):
        events.append({"ph": "i", "s": "t", "name": "preempted", "cat": "request", "pid": REQUESTS_PID,
                       "tid": _request_tid(e.stats.seq_id), "ts": _us(e.t_ns),
                       "args": {"step": e.step, **e.stats.to_dict()}})

    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {key: trace.header[key] for key in ("schema", "version", "recorded_at", "device")
                      if key in trace.header},
    }


def write_chrome_trace(trace: "Trace", path: str | Path) -> Path:
    """Write ``to_chrome_trace(trace)`` as JSON to ``path``; open it in ui.perfetto.dev."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        json.dump(to_chrome_trace(trace), f, ensure_ascii=False)
    return path
