"""The engine's resource state at any step, rebuilt from a trace's events alone.

The widgets need more than the step table: which sequence waits and which runs, who holds each KV block,
which free blocks still hold a reusable prefix, and what each request did in each step. This module
replays the events that change that state (no model, no torch) and answers "what did the engine look
like after step n?".

What is exact and what is derived:

- queues: REQUEST_ENQUEUE appends to ``waiting``; STATE_TRANSITION WAITING->RUNNING moves a sequence to
  the end of ``running``; a preemption (RUNNING->WAITING) puts it back at the *front* of ``waiting``, as
  the scheduler does; FINISHED removes it; SCHEDULE_DECODE puts the sequences it ran at the front of
  ``running`` in batch order. The lengths equal STEP_DONE's ``waiting_len`` / ``running_len``.
- block holders: BLOCK_ALLOCATE (fresh ``block_ids`` plus ``shared_block_ids``, the prefix-cache hits)
  and BLOCK_FREE; a block with several holders is a shared prefix block, its reference count is the
  number of holders.
- hashed ("cached") blocks: the events do not carry block hashes, so they are derived. The block
  manager names a block with its prefix hash once the K/V of all its ``block_size`` tokens has been
  computed (after the step that computed them), keeps the hash when the block is freed, and wipes it
  when the block is handed out again as a fresh block. The replay follows each sequence's block table
  and its count of computed tokens (the prefix-cache hit's ``num_cached_tokens`` at admission, plus
  each step's scheduled tokens: a prompt chunk's ``num_scheduled_tokens``, 1 per decode) and marks a
  block hashed when that count covers it. A *free* hashed block is "cached": its content can still be
  reused by a prefix-cache hit. Approximation: when two sequences computed the same prefix in separate
  blocks (both admitted before either was hashed), the engine's hash table finds only the later block;
  the replay counts both as cached. With prefix caching off nothing is ever hashed.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.trace.schema import TraceEvent

# The only events that change the state replayed here; the rest (tensors, sampling, ...) are skipped.
STATE_EVENTS = frozenset({"REQUEST_ENQUEUE", "PREFIX_CACHE_HIT", "BLOCK_ALLOCATE", "BLOCK_FREE",
                          "SCHEDULE_PREFILL", "SCHEDULE_DECODE", "STATE_TRANSITION", "STEP_DONE"})


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """The engine settings a replay needs."""

    block_size: int
    num_blocks: int
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    enable_prefix_caching: bool
    policy: str  # "continuous" or "static"


def trace_settings(trace: Trace) -> EngineSettings:
    """The engine settings of ``trace``, from its ENGINE_INIT / ENGINE_READY events, else its header's config."""
    config = trace.header.get("config") or {}
    init: dict = {}
    ready: dict = {}
    for e in trace.events:
        if e.event == "ENGINE_INIT":
            init = e.stats
        elif e.event == "ENGINE_READY":
            ready = e.stats
            break  # both come before the first request
    num_blocks = ready.get("num_kvcache_blocks") or config.get("num_kvcache_blocks")
    if not num_blocks and trace.steps:
        num_blocks = trace.steps[0].used_blocks + trace.steps[0].free_blocks
    return EngineSettings(
        block_size=int(init.get("block_size", config.get("kvcache_block_size", 256))),
        num_blocks=int(num_blocks or 0),
        max_num_seqs=init.get("max_num_seqs", config.get("max_num_seqs")),
        max_num_batched_tokens=init.get("max_num_batched_tokens", config.get("max_num_batched_tokens")),
        enable_prefix_caching=bool(init.get("enable_prefix_caching", config.get("enable_prefix_caching", True))),
        policy=str(init.get("policy", config.get("scheduling_policy", "continuous"))),
    )


@dataclass(slots=True)
class EngineState:
    """The scheduler's and block manager's state after some prefix of a trace's events."""

    block_size: int
    prefix_caching: bool
    step: int = 0  # the last completed step (0: before the first)
    waiting: list[int] = field(default_factory=list)  # queue order, head first
    running: list[int] = field(default_factory=list)
    preempted: set[int] = field(default_factory=set)  # waiting because they were preempted
    finished: list[int] = field(default_factory=list)  # finished in the last completed step
    holders: dict[int, set[int]] = field(default_factory=dict)  # used block -> seq ids holding it
    hashed: set[int] = field(default_factory=set)  # blocks named by a prefix hash, used or free
    tables: dict[int, list[int]] = field(default_factory=dict)  # seq -> its block table
    computed: dict[int, int] = field(default_factory=dict)  # seq -> tokens whose K/V is in the cache
    scheduled: dict[int, int] = field(default_factory=dict)  # seq -> tokens the current step computes

    def copy(self) -> "EngineState":
        return EngineState(
            self.block_size, self.prefix_caching, self.step, list(self.waiting), list(self.running),
            set(self.preempted), list(self.finished), {b: set(s) for b, s in self.holders.items()},
            set(self.hashed), {sid: list(t) for sid, t in self.tables.items()}, dict(self.computed),
            dict(self.scheduled))

    def apply(self, e: TraceEvent) -> None:
        """Advance the state over one event (events not in ``STATE_EVENTS`` change nothing)."""
        s = e.stats
        name = e.event
        if name == "REQUEST_ENQUEUE":
            self.waiting.append(s["seq_id"])
        elif name == "PREFIX_CACHE_HIT":
            # Emitted just before the sequence's BLOCK_ALLOCATE: its cached tokens need no computing.
            self.computed[s["seq_id"]] = s["num_cached_tokens"]
        elif name == "BLOCK_ALLOCATE":
            self._allocate(s["seq_id"], s.get("shared_block_ids", []), s["block_ids"])
        elif name == "BLOCK_FREE":
            sid = s["seq_id"]
            for block_id in s["block_ids"]:
                seqs = self.holders.get(block_id)
                if seqs is not None:
                    seqs.discard(sid)
                    if not seqs:
                        del self.holders[block_id]
            self.tables.pop(sid, None)
            self.computed.pop(sid, None)
            self.scheduled.pop(sid, None)
        elif name == "SCHEDULE_PREFILL":
            for sid, n in zip(s["seq_ids"], s["num_scheduled_tokens"]):
                self.scheduled[sid] = n
        elif name == "SCHEDULE_DECODE":
            ran = s["seq_ids"]
            for sid in ran:
                self.scheduled[sid] = 1
            # The scheduler puts the sequences it ran back at the front of ``running``, in batch order.
            ran_set = set(ran)
            self.running = list(ran) + [sid for sid in self.running if sid not in ran_set]
        elif name == "STATE_TRANSITION":
            self._transition(s["seq_id"], s.get("from"), s.get("to"))
        elif name == "STEP_DONE":
            for sid in list(self.scheduled):
                self._commit(sid)
            self.step = e.step if e.step is not None else self.step
            self.finished = list(s.get("finished", []))

    def _allocate(self, sid: int, shared: list[int], fresh: list[int]) -> None:
        table = self.tables.get(sid)
        if table is None:  # admission: the prefix-cache hits first, then fresh blocks
            table = self.tables[sid] = []
            self.computed.setdefault(sid, 0)
        for block_id in shared:
            table.append(block_id)
            self.holders.setdefault(block_id, set()).add(sid)
        for block_id in fresh:
            table.append(block_id)
            self.holders[block_id] = {sid}
            # Handing a block out again overwrites its K/V: its old hash no longer finds it.
            self.hashed.discard(block_id)

    def _commit(self, sid: int) -> None:
        """The step computed ``sid``'s scheduled tokens: blocks they filled get their hash."""
        n = self.scheduled.pop(sid, 0)
        before = self.computed.get(sid, 0)
        after = before + n
        table = self.tables.get(sid, [])
        if self.prefix_caching:
            for index in range(before // self.block_size, min(after // self.block_size, len(table))):
                self.hashed.add(table[index])
        if sid in self.tables:
            self.computed[sid] = after

    def _transition(self, sid: int, src: str | None, dst: str | None) -> None:
        if dst == "RUNNING":
            _remove(self.waiting, sid)
            self.preempted.discard(sid)
            self.running.append(sid)
        elif dst == "WAITING":  # preempted: recompute from the front of the queue
            _remove(self.running, sid)
            self.waiting.insert(0, sid)
            self.preempted.add(sid)
        elif dst == "FINISHED":
            # Postprocess hashes a finishing sequence's new blocks before it frees them.
            if sid in self.scheduled:
                self._commit(sid)
            _remove(self.waiting, sid)
            _remove(self.running, sid)
            self.preempted.discard(sid)


def _remove(queue: list[int], sid: int) -> None:
    if sid in queue:
        queue.remove(sid)


@dataclass(frozen=True, slots=True)
class KVSnapshot:
    """The KV cache at the end of one step: who holds each used block, and which free blocks are cached."""

    step: int
    num_blocks: int
    holders: dict[int, tuple[int, ...]]  # used block -> seq ids holding it; 2+ ids: a shared prefix block
    cached_free: frozenset[int]  # free blocks whose content is still hashed (reusable by a prefix hit)

    @property
    def num_used(self) -> int:
        return len(self.holders)

    @property
    def num_free(self) -> int:
        return self.num_blocks - len(self.holders)

    @property
    def shared(self) -> dict[int, int]:
        """Shared blocks and their reference counts."""
        return {b: len(seqs) for b, seqs in self.holders.items() if len(seqs) > 1}


@dataclass(frozen=True, slots=True)
class Queues:
    """The scheduler's queues at the end of one step (seq ids, head first)."""

    step: int
    waiting: tuple[int, ...]
    running: tuple[int, ...]
    preempted: tuple[int, ...]  # the waiting sequences that are there because they were preempted
    finished: tuple[int, ...]  # sequences that finished in this step


class EngineReplay:
    """Random access to the replayed engine state of one trace, step by step.

    One pass over the events keeps a copy of the state every ``keyframe_every`` steps; ``state_at(n)``
    starts from the nearest earlier copy and applies the events up to step ``n``'s STEP_DONE, so any
    step costs at most ``keyframe_every`` steps of events, however long the trace.
    """

    def __init__(self, trace: Trace, keyframe_every: int = 32) -> None:
        settings = trace_settings(trace)
        self.trace = trace
        self.num_blocks = settings.num_blocks
        blank = EngineState(settings.block_size, settings.enable_prefix_caching)
        self._events = [e for e in trace.events if e.event in STATE_EVENTS]
        # Position (in ``_events``) of each completed step's STEP_DONE.
        self._done_at: dict[int, int] = {}
        # (state after the step, the position of its STEP_DONE); the first is the state before any event.
        self._keyframe_steps: list[float] = [float("-inf")]
        self._keyframes: list[tuple[EngineState, int]] = [(blank.copy(), -1)]
        state = blank
        for pos, e in enumerate(self._events):
            state.apply(e)
            if e.event == "STEP_DONE" and e.step is not None:
                self._done_at[e.step] = pos
                if len(self._done_at) % keyframe_every == 0:
                    self._keyframe_steps.append(e.step)
                    self._keyframes.append((state.copy(), pos))
        self.steps: list[int] = sorted(self._done_at)

    def state_at(self, step: int) -> EngineState:
        """The state at the end of ``step`` (a fresh copy the caller may change)."""
        if step not in self._done_at:
            raise KeyError(f"step {step} has no STEP_DONE in this trace (steps {self.steps[0]}.."
                           f"{self.steps[-1]})" if self.steps else "this trace has no completed step")
        k = bisect.bisect_right(self._keyframe_steps, step) - 1
        state, pos = self._keyframes[k]
        state = state.copy()
        for e in self._events[pos + 1:self._done_at[step] + 1]:
            state.apply(e)
        return state

    def kv_at(self, step: int) -> KVSnapshot:
        """The KV cache at the end of ``step``."""
        return kv_snapshot(self.state_at(step), self.num_blocks)

    def queues_at(self, step: int) -> Queues:
        """The queues at the end of ``step``."""
        return queues(self.state_at(step))


def kv_snapshot(state: EngineState, num_blocks: int) -> KVSnapshot:
    """The KV cache as ``state`` holds it (a cache of ``num_blocks`` blocks)."""
    holders = {b: tuple(sorted(seqs)) for b, seqs in sorted(state.holders.items())}
    return KVSnapshot(state.step, num_blocks, holders, frozenset(state.hashed - state.holders.keys()))


def queues(state: EngineState) -> Queues:
    """The queues as ``state`` holds them."""
    preempted = tuple(sid for sid in state.waiting if sid in state.preempted)
    return Queues(state.step, tuple(state.waiting), tuple(state.running), preempted, tuple(state.finished))


# --- what each request did in each step (the Gantt chart's rows) -----------------------------------------

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
    state = EngineState(trace_settings(trace).block_size, False)  # blocks do not matter here
    segments: list[Segment] = []
    open_runs: dict[int, _Run] = {}  # each request's current run of steps in one state
    prefill: dict[int, tuple[int, bool]] = {}  # the current step's prefill chunks: seq -> (tokens, partial)
    decode: set[int] = set()
    finishing: list[int] = []

    def close(sid: int) -> None:
        run = open_runs.pop(sid, None)
        if run is not None:
            segments.append(Segment(sid, run.state, run.first, run.last + 1))

    for e in trace.events:
        if e.event not in STATE_EVENTS:
            continue
        if e.event == "SCHEDULE_PREFILL":
            s = e.stats
            chunked = s.get("chunked") or [False] * len(s["seq_ids"])
            prefill = {sid: (n, bool(c)) for sid, n, c in zip(s["seq_ids"], s["num_scheduled_tokens"], chunked)}
        elif e.event == "SCHEDULE_DECODE":
            decode = set(e.stats["seq_ids"])
        elif e.event == "STATE_TRANSITION" and e.stats.get("to") == "FINISHED":
            if e.step is None or e.reason == "aborted":  # aborted: it leaves now, not at a step's end
                close(e.stats["seq_id"])
            else:
                finishing.append(e.stats["seq_id"])
        if e.event != "STEP_DONE" or e.step is None:
            state.apply(e)
            continue
        # The step is over: classify every request that was in the engine during it (the ones finishing
        # in it have already left the queues).
        step = e.step
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
        state.apply(e)
        prefill, decode, finishing = {}, set(), []
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
    ``(finish, batch end]`` during which its slot stayed held (seed 000's ``....``). Empty otherwise."""
    if trace_settings(trace).policy != "static":
        return []
    finish = {r.seq_id: r.finish_step for r in trace.requests if r.finish_step is not None}
    held = []
    for batch in static_batches(trace):
        for sid in batch.members:
            f = finish.get(sid)
            if f is not None and batch.first_step <= f < batch.last_step:
                held.append(Segment(sid, "held", f + 1, batch.last_step + 1))
    return held
