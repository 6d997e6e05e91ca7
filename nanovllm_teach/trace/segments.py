"""What each request did in each step (the Gantt chart's rows), and the batches of a static-batching run.

Part of the torch-free trace layer: the queues come from the one interpreter of events (``state.walk``).
"""

from __future__ import annotations

from dataclasses import dataclass

from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.trace.state import ends_a_step, walk


@dataclass(frozen=True, slots=True)
class Segment:
    """Steps ``[step_start, step_end)`` one request spent in one state.

    ``waiting``: arrived, not admitted yet. ``preempted``: waiting again after a preemption (its blocks
    were taken; it will be prefilled again). ``prefill``: one step that computed part or all of its prompt
    (one segment per step, so a chunked prompt shows as several; ``tokens`` is the chunk size and
    ``partial`` says the prompt was not complete after it). ``decode``: steps that computed one token of
    it each. ``stalled``: admitted but not in the step's batch (another request's prefill step ran).
    ``held`` (from ``held_segments``, static batching only): finished, its slot held until the batch ends.
    """

    seq_id: int
    state: str
    step_start: int
    step_end: int
    tokens: int = 0
    partial: bool = False


@dataclass(slots=True)
class _Run:
    """Steps ``first..last`` (inclusive) of one request in one state, still growing."""

    state: str
    first: int
    last: int


def request_segments(trace: Trace) -> list[Segment]:
    """Every request's segments, from one pass over the events (the Gantt chart draws these)."""
    segments: list[Segment] = []
    open_runs: dict[int, _Run] = {}  # each request's current run of steps in one state

    def close(sid: int) -> None:
        run = open_runs.pop(sid, None)
        if run is not None:
            segments.append(Segment(sid, run.state, run.first, run.last + 1))

    for e, state in walk(trace.events, trace.settings):
        if e.event == "STATE_TRANSITION" and e.stats.to == "FINISHED":
            if e.step is None or e.reason == "aborted":  # aborted: it leaves now, not at a step's end
                close(e.stats.seq_id)
            continue
        if not ends_a_step(e):
            continue
        # The step is over: classify every request that was in the engine during it (the ones finishing
        # in it have already left the queues).
        step = e.step
        schedule = state.done.schedule
        prefill: dict[int, tuple[int, bool]] = {}  # the step's prefill chunks: seq -> (tokens, partial)
        decode: set[int] = set()
        if schedule is not None and schedule.event == "SCHEDULE_PREFILL":
            s = schedule.stats
            prefill = {sid: (n, c) for sid, n, c in zip(s.seq_ids, s.num_scheduled_tokens, s.chunked)}
        elif schedule is not None:
            decode = set(schedule.stats.seq_ids)
        finishing = [t.stats.seq_id for t in state.done.finishing if t.reason != "aborted"]
        running = set(state.running)
        for sid in [*state.waiting, *state.running, *finishing]:
            if sid in prefill:
                tokens, partial = prefill[sid]
                close(sid)
                segments.append(Segment(sid, "prefill", step, step + 1, tokens, partial))
                continue
            if sid in decode:
                kind = "decode"
            elif sid in running:
                kind = "stalled"
            elif sid in state.preempted:
                kind = "preempted"
            else:
                kind = "waiting"
            run = open_runs.get(sid)
            if run is not None and run.state == kind and run.last == step - 1:
                run.last = step
            else:
                close(sid)
                open_runs[sid] = _Run(kind, step, step)
        for sid in finishing:
            close(sid)
    for sid in list(open_runs):
        close(sid)
    segments.sort(key=lambda seg: (seg.seq_id, seg.step_start))
    return segments


@dataclass(frozen=True, slots=True)
class StaticBatch:
    """One batch of a static-batching run: steps ``first_step..last_step`` (inclusive) and its members."""

    first_step: int
    last_step: int
    members: tuple[int, ...]


def static_batches(trace: Trace) -> list[StaticBatch]:
    """Split a run into batches: a batch starts at a step that began with nobody running and ends at the
    step after which nobody runs (and no prompt is part-way through a chunked prefill).

    Under static batching this is exactly the scheduler's batches (it admits only into an empty
    ``running``); under continuous batching a "batch" is just a stretch of uninterrupted work.
    """
    batches: list[StaticBatch] = []
    start: int | None = None
    members: dict[int, None] = {}  # an ordered set
    for row in trace.steps:
        if start is None:
            start, members = row.step, {}
        members.update(dict.fromkeys(row.seq_ids))
        if row.running_len == 0 and not row.chunked:
            batches.append(StaticBatch(start, row.step, tuple(members)))
            start = None
    if start is not None:
        batches.append(StaticBatch(start, trace.steps[-1].step, tuple(members)))
    return batches


def held_segments(trace: Trace) -> list[Segment]:
    """Static batching only: for each request that finished before its batch's last step, the steps
    ``(finish, batch end]`` during which its slot stayed held (the ``....`` of an ASCII timeline). Empty otherwise."""
    if trace.settings.policy != "static":
        return []
    finish = {r.seq_id: r.finish_step for r in trace.requests if r.finish_step is not None}
    held = []
    for batch in static_batches(trace):
        for sid in batch.members:
            f = finish.get(sid)
            if f is not None and batch.first_step <= f < batch.last_step:
                held.append(Segment(sid, "held", f + 1, batch.last_step + 1))
    return held
