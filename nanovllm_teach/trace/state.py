"""The one interpreter of TEACHING events: the engine's resource state, rebuilt from a trace's events alone.

Part of the torch-free trace layer. ``walk`` goes once over the events and yields, after every event that
changes the state, that event and the ``EngineState`` it left; everything that reads a trace as engine
state (the tables, the consistency check, the Perfetto export, the Gantt segments, the block grid, the
player) reads it from here, so each event means one thing everywhere.

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
- the step in progress: its SCHEDULE_* event, preemptions, prefix-cache hits and finishing sequences,
  handed over as ``EngineState.done`` when its STEP_DONE arrives.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from nanovllm_teach.trace.events import events_where
from nanovllm_teach.trace.schema import TraceEvent

# The only events that change the state, as their payload types declare (``changes_state``); the rest
# (tensors, sampling, ...) are skipped. ``EngineState.apply`` has one case for each.
STATE_EVENTS = frozenset(events_where(lambda payload: payload.changes_state))


def ends_a_step(e: TraceEvent) -> bool:
    """Whether ``e`` completes an engine step (a STEP_DONE that names its step): a step's state, its row in
    the tables and its events (``steps.cut_steps``) end there."""
    return e.event == "STEP_DONE" and e.step is not None


@dataclass(frozen=True, slots=True)
class EngineSettings:
    """The engine settings a replay needs."""

    block_size: int
    num_blocks: int
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    enable_prefix_caching: bool
    policy: str  # "continuous" or "static"


def read_settings(header: dict[str, Any], events: Iterable[TraceEvent]) -> EngineSettings:
    """The engine settings of a trace, from its ENGINE_INIT / ENGINE_READY events, else its header's config
    (else the first step's block counts, for the number of blocks)."""
    config = header.get("config") or {}
    init: Any = {}
    ready: Any = {}
    first_done: Any = None
    for e in events:
        if e.event == "ENGINE_INIT":
            init = e.stats
        elif e.event == "ENGINE_READY":
            ready = e.stats
        elif e.event == "STEP_DONE":
            first_done = e.stats
            break  # start-up is over
    num_blocks = ready.get("num_kvcache_blocks") or config.get("num_kvcache_blocks")
    if not num_blocks and first_done is not None:
        num_blocks = first_done["used_blocks"] + first_done["free_blocks"]
    return EngineSettings(
        block_size=int(init.get("block_size", config.get("kvcache_block_size", 256))),
        num_blocks=int(num_blocks or 0),
        max_num_seqs=init.get("max_num_seqs", config.get("max_num_seqs")),
        max_num_batched_tokens=init.get("max_num_batched_tokens", config.get("max_num_batched_tokens")),
        enable_prefix_caching=bool(init.get("enable_prefix_caching", config.get("enable_prefix_caching", True))),
        policy=str(init.get("policy", config.get("scheduling_policy", "continuous"))),
    )


@dataclass(slots=True)
class StepParts:
    """The events of one step besides its STEP_DONE (``schedule`` is None if the trace lacks it)."""

    schedule: TraceEvent | None = None
    preempts: list[TraceEvent] = field(default_factory=list)
    hits: list[TraceEvent] = field(default_factory=list)
    finishing: list[TraceEvent] = field(default_factory=list)  # STATE_TRANSITIONs to FINISHED in the step


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
    current: StepParts = field(default_factory=StepParts)  # the step in progress
    done: StepParts | None = None  # the parts of the step the last STEP_DONE completed
    emptied: list[int] = field(default_factory=list)  # blocks the last BLOCK_FREE left with no holder

    def copy(self) -> "EngineState":
        """A copy whose queues, blocks and tables can change without touching this one."""
        return EngineState(
            self.block_size, self.prefix_caching, self.step, list(self.waiting), list(self.running),
            set(self.preempted), list(self.finished), {b: set(s) for b, s in self.holders.items()},
            set(self.hashed), {sid: list(t) for sid, t in self.tables.items()}, dict(self.computed),
            dict(self.scheduled), StepParts(self.current.schedule, list(self.current.preempts),
                                            list(self.current.hits), list(self.current.finishing)),
            self.done, list(self.emptied))

    def apply(self, e: TraceEvent) -> None:
        """Advance the state over one event (events not in ``STATE_EVENTS`` change nothing)."""
        s = e.stats
        name = e.event
        if name == "REQUEST_ENQUEUE":
            self.waiting.append(s.seq_id)
        elif name == "PREFIX_CACHE_HIT":
            # Emitted just before the sequence's BLOCK_ALLOCATE: its cached tokens need no computing.
            self.computed[s.seq_id] = s.num_cached_tokens
            self.current.hits.append(e)
        elif name == "BLOCK_ALLOCATE":
            self._allocate(s.seq_id, s.shared_block_ids, s.block_ids)
        elif name == "BLOCK_FREE":
            self._free(s.seq_id, s.block_ids)
        elif name == "PREEMPT":
            self.current.preempts.append(e)
        elif name == "SCHEDULE_PREFILL":
            self.current.schedule = e
            for sid, n in zip(s.seq_ids, s.num_scheduled_tokens):
                self.scheduled[sid] = n
        elif name == "SCHEDULE_DECODE":
            self.current.schedule = e
            ran = s.seq_ids
            for sid in ran:
                self.scheduled[sid] = 1
            # The scheduler puts the sequences it ran back at the front of ``running``, in batch order.
            ran_set = set(ran)
            self.running = list(ran) + [sid for sid in self.running if sid not in ran_set]
        elif name == "STATE_TRANSITION":
            self._transition(e)
        elif name == "STEP_DONE":
            self._commit_all()
            self.step = e.step if e.step is not None else self.step
            self.finished = list(s.finished)
            self.done, self.current = self.current, StepParts()

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

    def _free(self, sid: int, block_ids: list[int]) -> None:
        self.emptied = []
        for block_id in block_ids:
            seqs = self.holders.get(block_id)
            if seqs is not None:
                seqs.discard(sid)
                if not seqs:
                    del self.holders[block_id]
                    self.emptied.append(block_id)
        self.tables.pop(sid, None)
        self.computed.pop(sid, None)
        self.scheduled.pop(sid, None)

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

    def _commit_all(self) -> None:
        """``_commit`` for every sequence the step ran (this runs once per step of a long trace: the loop
        touches a block table only when the step filled a block)."""
        size, computed, hashing = self.block_size, self.computed, self.prefix_caching
        for sid, n in self.scheduled.items():
            before = computed.get(sid)  # None: the sequence holds no blocks (any more)
            if before is None:
                continue
            after = computed[sid] = before + n
            if hashing and after // size > before // size:
                table = self.tables.get(sid, [])
                self.hashed.update(table[before // size:min(after // size, len(table))])
        self.scheduled.clear()

    def _transition(self, e: TraceEvent) -> None:
        sid, dst = e.stats.seq_id, e.stats.to
        if dst == "RUNNING":
            _remove(self.waiting, sid)
            self.preempted.discard(sid)
            self.running.append(sid)
        elif dst == "WAITING":  # preempted: recompute from the front of the queue
            _remove(self.running, sid)
            self.waiting.insert(0, sid)
            self.preempted.add(sid)
        elif dst == "FINISHED":
            if e.step is not None:
                self.current.finishing.append(e)
            # Postprocess hashes a finishing sequence's new blocks before it frees them.
            if sid in self.scheduled:
                self._commit(sid)
            _remove(self.waiting, sid)
            _remove(self.running, sid)
            self.preempted.discard(sid)


def _remove(queue: list[int], sid: int) -> None:
    if sid in queue:
        queue.remove(sid)


def walk(events: Iterable[TraceEvent], settings: EngineSettings) -> Iterator[tuple[TraceEvent, EngineState]]:
    """Every state-changing event, each with the state it left (one state object, changed in place: copy
    it to keep it). After a STEP_DONE, ``state.done`` holds that step's other events."""
    state = EngineState(settings.block_size, settings.enable_prefix_caching)
    for e in events:
        if e.event in STATE_EVENTS:
            state.apply(e)
            yield e, state
