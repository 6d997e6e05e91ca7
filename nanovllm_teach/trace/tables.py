"""Tables derived from a trace's events alone: one row per engine step, one row per request, the spans
each request spent waiting / prefilling / decoding, and the KV blocks each step ended with.

Part of the torch-free trace layer (standard library only), so the widgets can replay a trace anywhere.

Where the numbers come from:

- a step row is its STEP_DONE event (phase, batch, latency, blocks, queues, finished), completed by the
  step's SCHEDULE_PREFILL / SCHEDULE_DECODE (tokens computed, partial prefill chunks), PREEMPT and
  PREFIX_CACHE_HIT events. A step without STEP_DONE (the run crashed inside it) has no row.
- a request row starts at REQUEST_ENQUEUE. Every completed step that ran the sequence gave it one new
  token, except a prefill step that computed only a chunk of its prompt; that count is the request's
  completion tokens, and the first such step is when its first token appeared. STATE_TRANSITION to
  FINISHED gives the finish step and reason, PREEMPT the preemptions.
- a token is "out" when its step ends, so first-token and finish times are step end times (TTFT, TPOT and
  end-to-end latency follow the engine's view: a token exists once ``step()`` returns it).

``check_consistency`` cross-checks the trace against itself (block replay vs STEP_DONE.used_blocks, finished
ids, token counts, step counts per generate() call); a clean trace gives an empty list.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable

from nanovllm_teach.trace.schema import TraceEvent

if TYPE_CHECKING:
    from nanovllm_teach.trace.reader import Trace


@dataclass(slots=True)
class StepRow:
    """One engine step."""

    step: int
    phase: str  # "prefill" or "decode"
    batch_size: int
    seq_ids: list[int]
    # Tokens the model computed: the prompt tokens (or chunks) of a prefill, one per sequence in a decode.
    # None only if the trace lacks the step's SCHEDULE_* event.
    num_batched_tokens: int | None
    # The engine's signed stat (seed 000 2.4.1): prefill = total length of its sequences after their new
    # token, decode = minus the number of sequences.
    num_tokens_stat: int
    latency_ms: float
    used_blocks: int
    free_blocks: int
    waiting_len: int
    running_len: int
    finished: list[int]
    preempted: list[int]
    prefix_hit_seq_ids: list[int]
    num_cached_tokens: int  # prompt tokens served from the prefix cache in this step
    chunked: list[int]  # sequences that computed only part of their prompt and continue next step
    t_start_ns: int  # STEP_DONE time minus the step's own measured latency (never before the last step's end)
    t_end_ns: int  # STEP_DONE time


@dataclass(slots=True)
class RequestRow:
    """One request, from enqueue to finish. Times are ns since the trace began; ``*_ms`` are durations."""

    seq_id: int
    prompt_len: int
    max_tokens: int
    temperature: float
    enqueue_t_ns: int
    enqueue_step: int  # the first engine step that ran after the request was enqueued
    first_scheduled_step: int | None
    first_scheduled_t_ns: int | None
    first_token_step: int | None
    first_token_t_ns: int | None
    finish_step: int | None
    finish_t_ns: int | None
    finish_reason: str | None  # eos, length, max_model_len, aborted; None while unfinished
    num_completion_tokens: int
    num_preemptions: int
    num_cached_tokens: int  # prompt tokens served from the prefix cache, summed over admissions
    ttft_ms: float | None  # enqueue -> first token
    tpot_ms: float | None  # mean time per output token after the first
    e2e_ms: float | None  # enqueue -> finish


@dataclass(slots=True)
class RequestSpan:
    """A stretch of time one request spent in one state: ``waiting``, ``prefill`` or ``decode``.

    Steps are half-open, ``[step_start, step_end)``: a waiting span that ends in the very step after the
    enqueue covers no step at all (``step_start == step_end``).
    """

    seq_id: int
    state: str
    t_start_ns: int
    t_end_ns: int
    step_start: int
    step_end: int


@dataclass(slots=True)
class _StepParts:
    """The events of one step that a row is built from."""

    done: TraceEvent | None = None
    schedule: TraceEvent | None = None
    preempts: list[TraceEvent] = field(default_factory=list)
    hits: list[TraceEvent] = field(default_factory=list)


_PART_EVENTS = frozenset({"STEP_DONE", "SCHEDULE_PREFILL", "SCHEDULE_DECODE", "PREEMPT", "PREFIX_CACHE_HIT"})


def _step_parts(events: Iterable[TraceEvent]) -> dict[int, _StepParts]:
    parts: dict[int, _StepParts] = {}
    for e in events:
        # Most events (tensors, sampling, ...) are none of these: skip them before any other work.
        if e.event not in _PART_EVENTS or e.step is None:
            continue
        p = parts.get(e.step)
        if p is None:
            p = parts[e.step] = _StepParts()
        if e.event == "STEP_DONE":
            p.done = e
        elif e.event in ("SCHEDULE_PREFILL", "SCHEDULE_DECODE"):
            p.schedule = e
        elif e.event == "PREEMPT":
            p.preempts.append(e)
        else:
            p.hits.append(e)
    return parts


def step_table(trace: "Trace") -> list[StepRow]:
    """The per-step table (``Trace.steps``)."""
    rows: list[StepRow] = []
    for step, p in sorted(_step_parts(trace.events).items()):
        if p.done is None:
            continue
        s = p.done.stats
        sched = p.schedule.stats if p.schedule is not None else {}
        chunk_flags = sched.get("chunked", [])
        # The step began its own latency before STEP_DONE; the clamp keeps µs rounding of latency_ms from
        # overlapping it with the step before (timeline viewers need slices on a track not to overlap).
        t_start = p.done.t_ns - round(s["latency_ms"] * 1e6)
        if rows:
            t_start = max(t_start, rows[-1].t_end_ns)
        rows.append(StepRow(
            step=step, phase=p.done.phase, batch_size=s["batch_size"],
            seq_ids=list(s["seq_ids"]), num_batched_tokens=sched.get("num_batched_tokens"),
            num_tokens_stat=s["num_tokens_stat"], latency_ms=s["latency_ms"], used_blocks=s["used_blocks"],
            free_blocks=s["free_blocks"], waiting_len=s["waiting_len"], running_len=s["running_len"],
            finished=list(s["finished"]), preempted=[e.stats["seq_id"] for e in p.preempts],
            prefix_hit_seq_ids=[e.stats["seq_id"] for e in p.hits],
            num_cached_tokens=sum(e.stats["num_cached_tokens"] for e in p.hits),
            chunked=[sid for sid, flag in zip(sched.get("seq_ids", []), chunk_flags) if flag],
            t_start_ns=t_start, t_end_ns=p.done.t_ns))
    return rows


def _tokens_by_seq(rows: list[StepRow]) -> tuple[dict[int, int], Counter[int]]:
    """For each sequence, the first step that gave it a new token and how many steps did (every step
    that ran it gives one, except a prefill step that computed only a chunk of its prompt)."""
    first: dict[int, int] = {}
    count: Counter[int] = Counter()
    for row in rows:
        # Set and Counter operations run in C: this loop sees every (step, sequence) pair of a long trace.
        count.update(row.seq_ids)
        if row.chunked:
            count.subtract(row.chunked)
        fresh = set(row.seq_ids).difference(first, row.chunked)
        for sid in fresh:
            first[sid] = row.step
    return first, count


def _ms(t0: int | None, t1: int | None) -> float | None:
    return None if t0 is None or t1 is None else (t1 - t0) / 1e6


def request_table(trace: "Trace") -> list[RequestRow]:
    """The per-request table (``Trace.requests``)."""
    rows_by_step = {row.step: row for row in trace.steps}
    first_token_step, token_count = _tokens_by_seq(trace.steps)
    requests: dict[int, RequestRow] = {}
    last_step = 0  # the latest completed step seen so far, to place enqueues between steps
    for e in trace.events:
        s = e.stats
        if e.event == "STEP_DONE" and e.step is not None:
            last_step = e.step
        elif e.event == "REQUEST_ENQUEUE":
            requests[s["seq_id"]] = RequestRow(
                seq_id=s["seq_id"], prompt_len=s["prompt_len"], max_tokens=s["max_tokens"],
                temperature=s["temperature"], enqueue_t_ns=e.t_ns, enqueue_step=last_step + 1,
                first_scheduled_step=None, first_scheduled_t_ns=None, first_token_step=None,
                first_token_t_ns=None, finish_step=None, finish_t_ns=None, finish_reason=None,
                num_completion_tokens=0, num_preemptions=0, num_cached_tokens=0,
                ttft_ms=None, tpot_ms=None, e2e_ms=None)
        elif e.event == "SCHEDULE_PREFILL":
            for sid in s["seq_ids"]:
                req = requests.get(sid)
                if req is not None and req.first_scheduled_step is None:
                    req.first_scheduled_step = e.step
                    row = rows_by_step.get(e.step)
                    req.first_scheduled_t_ns = row.t_start_ns if row is not None else e.t_ns
        elif e.event == "PREEMPT" and s["seq_id"] in requests:
            requests[s["seq_id"]].num_preemptions += 1
        elif e.event == "PREFIX_CACHE_HIT" and s["seq_id"] in requests:
            requests[s["seq_id"]].num_cached_tokens += s["num_cached_tokens"]
        elif e.event == "STATE_TRANSITION" and s.get("to") == "FINISHED" and s["seq_id"] in requests:
            req = requests[s["seq_id"]]
            req.finish_step = e.step
            row = rows_by_step.get(e.step) if e.step is not None else None
            req.finish_t_ns = row.t_end_ns if row is not None else e.t_ns
            req.finish_reason = s.get("finish_reason", e.reason)

    for req in requests.values():
        n = token_count.get(req.seq_id, 0)
        req.num_completion_tokens = n
        if n:
            req.first_token_step = first_token_step[req.seq_id]
            req.first_token_t_ns = rows_by_step[req.first_token_step].t_end_ns
        req.ttft_ms = _ms(req.enqueue_t_ns, req.first_token_t_ns)
        req.e2e_ms = _ms(req.enqueue_t_ns, req.finish_t_ns)
        if req.finish_t_ns is not None and req.first_token_t_ns is not None and n > 1:
            req.tpot_ms = (req.finish_t_ns - req.first_token_t_ns) / 1e6 / (n - 1)
    return [requests[sid] for sid in sorted(requests)]


def request_spans(trace: "Trace") -> list[RequestSpan]:
    """Every request's waiting / prefill / decode spans, in the order they close.

    A preempted request goes back to ``waiting`` at its PREEMPT and is prefilled again (recompute), so it
    can have several spans of each state. Spans still open when the trace ends close at its last event.
    """
    rows_by_step = {row.step: row for row in trace.steps}
    open_spans: dict[int, RequestSpan] = {}
    spans: list[RequestSpan] = []
    last_step = 0

    def step_start(e: TraceEvent) -> int:
        row = rows_by_step.get(e.step)
        return row.t_start_ns if row is not None else e.t_ns

    def switch(sid: int, state: str | None, t_ns: int, step: int) -> None:
        """Close ``sid``'s open span at (t_ns, step) and, unless ``state`` is None, open one in ``state``."""
        current = open_spans.pop(sid, None)
        if current is not None:
            current.t_end_ns, current.step_end = t_ns, step
            spans.append(current)
        if state is not None:
            open_spans[sid] = RequestSpan(sid, state, t_ns, t_ns, step, step)

    for e in trace.events:
        s = e.stats
        if e.event == "STEP_DONE" and e.step is not None:
            last_step = e.step
        elif e.event == "REQUEST_ENQUEUE":
            switch(s["seq_id"], "waiting", e.t_ns, last_step + 1)
        elif e.event == "SCHEDULE_PREFILL":
            for sid in s["seq_ids"]:
                # A chunked prompt is scheduled in several steps but is one prefill span.
                if sid in open_spans and open_spans[sid].state == "waiting":
                    switch(sid, "prefill", step_start(e), e.step)
        elif e.event == "SCHEDULE_DECODE":
            for sid in s["seq_ids"]:
                if sid in open_spans and open_spans[sid].state == "prefill":
                    switch(sid, "decode", step_start(e), e.step)
        elif e.event == "PREEMPT" and s["seq_id"] in open_spans:
            switch(s["seq_id"], "waiting", e.t_ns, e.step)
        elif e.event == "STATE_TRANSITION" and s.get("to") == "FINISHED" and s["seq_id"] in open_spans:
            row = rows_by_step.get(e.step) if e.step is not None else None
            if row is not None:
                switch(s["seq_id"], None, row.t_end_ns, row.step + 1)
            else:  # aborted between steps, or inside a step that never completed
                switch(s["seq_id"], None, e.t_ns, e.step if e.step is not None else last_step + 1)
    end_t = trace.events[-1].t_ns if trace.events else 0
    for sid in list(open_spans):
        switch(sid, None, end_t, last_step + 1)
    return spans


class _BlockReplay:
    """Who holds each KV block, rebuilt from BLOCK_ALLOCATE / BLOCK_FREE events alone."""

    def __init__(self) -> None:
        self.holders: dict[int, set[int]] = {}

    def apply(self, e: TraceEvent) -> list[int]:
        """Apply one block event; returns the blocks it left with no holder (now free)."""
        s = e.stats
        if e.event == "BLOCK_ALLOCATE":
            # Shared prefix blocks gain one more holder; fresh blocks get their first.
            for block_id in [*s.get("shared_block_ids", []), *s["block_ids"]]:
                self.holders.setdefault(block_id, set()).add(s["seq_id"])
            return []
        emptied = []
        for block_id in s["block_ids"]:
            seqs = self.holders.get(block_id, set())
            seqs.discard(s["seq_id"])
            if not seqs:
                self.holders.pop(block_id, None)
                emptied.append(block_id)
        return emptied

    def snapshot(self) -> dict[int, list[int]]:
        return {block_id: sorted(seqs) for block_id, seqs in sorted(self.holders.items())}


def replay_blocks(trace: "Trace") -> dict[int, dict[int, list[int]]]:
    """Replay BLOCK_ALLOCATE / BLOCK_FREE: for each completed step, which sequences hold each used block.

    ``{step: {block_id: [seq_id, ...]}}``; a block listed with several sequences is a shared prefix block.
    Its length is the number of used blocks at the end of the step.
    """
    replay = _BlockReplay()
    snapshots: dict[int, dict[int, list[int]]] = {}
    for e in trace.events:
        if e.event in ("BLOCK_ALLOCATE", "BLOCK_FREE"):
            replay.apply(e)
        elif e.event == "STEP_DONE" and e.step is not None:
            snapshots[e.step] = replay.snapshot()
    return snapshots


def check_consistency(trace: "Trace") -> list[str]:
    """Cross-check the trace against itself; each problem found is one sentence (empty list: consistent).

    - replaying the block events gives each step's ``used_blocks`` (and each event's ``num_free_blocks``);
    - each step's ``finished`` ids are the sequences that moved to FINISHED in it;
    - each finished request's token count (one per completed step that ran it, chunks excepted) equals the
      ``num_completion_tokens`` its FINISHED transition reports;
    - the steps between GENERATE_START and GENERATE_FINISH are as many as GENERATE_FINISH says.
    """
    problems: list[str] = []
    rows = trace.steps

    total_blocks = next((e.stats["num_kvcache_blocks"] for e in trace.events_named("ENGINE_READY")), None)
    replay = _BlockReplay()
    for e in trace.events_named("BLOCK_ALLOCATE", "BLOCK_FREE"):
        emptied = replay.apply(e)
        s = e.stats
        if e.event == "BLOCK_FREE" and sorted(s.get("freed_block_ids", emptied)) != sorted(emptied):
            problems.append(f"event {e.i}: BLOCK_FREE says blocks {sorted(s['freed_block_ids'])} became "
                            f"free, the replay frees {sorted(emptied)}")
        if total_blocks is not None and s["num_free_blocks"] != total_blocks - len(replay.holders):
            problems.append(f"event {e.i} ({e.event}): num_free_blocks={s['num_free_blocks']}, the replay "
                            f"has {total_blocks - len(replay.holders)} of {total_blocks} free")
    replayed = replay_blocks(trace)
    for row in rows:
        if len(replayed[row.step]) != row.used_blocks:
            problems.append(f"step {row.step}: replaying the block events gives {len(replayed[row.step])} "
                            f"used blocks, STEP_DONE says {row.used_blocks}")
        if row.batch_size != len(row.seq_ids):
            problems.append(f"step {row.step}: batch_size={row.batch_size} but {len(row.seq_ids)} seq_ids")

    finished_by_step: dict[int, list[int]] = {}
    reported_tokens: dict[int, int] = {}
    for e in trace.events_named("STATE_TRANSITION"):
        if e.stats.get("to") == "FINISHED" and e.step is not None:
            finished_by_step.setdefault(e.step, []).append(e.stats["seq_id"])
            if e.reason != "aborted":
                reported_tokens[e.stats["seq_id"]] = e.stats["num_completion_tokens"]
    for row in rows:
        transitions = sorted(finished_by_step.get(row.step, []))
        if sorted(row.finished) != transitions:
            problems.append(f"step {row.step}: STEP_DONE.finished={sorted(row.finished)}, the FINISHED "
                            f"transitions in it are {transitions}")
    counted = {req.seq_id: req.num_completion_tokens for req in trace.requests}
    for sid, n in sorted(reported_tokens.items()):
        if counted.get(sid) != n:
            problems.append(f"seq {sid}: finished with num_completion_tokens={n}, the steps that ran it "
                            f"produced {counted.get(sid)}")

    window: list[str] | None = None
    for e in trace.events_named("STEP_DONE", "GENERATE_START", "GENERATE_FINISH"):
        if e.event == "GENERATE_START":
            window = []
        elif e.event == "STEP_DONE" and window is not None:
            window.append(e.phase)
        elif e.event == "GENERATE_FINISH" and window is not None:
            want = (e.stats["total_steps"], e.stats["prefill_steps"], e.stats["decode_steps"])
            got = (len(window), window.count("prefill"), window.count("decode"))
            if want != got:
                problems.append(f"event {e.i}: GENERATE_FINISH reports (total, prefill, decode) steps {want}, "
                                f"the trace has {got} STEP_DONE events in that generate() call")
            window = None
    return problems


def format_step_table(rows: list[StepRow], limit: int | None = None) -> str:
    """The per-step table as fixed-width text (one line per step; ``limit`` keeps the first rows)."""
    header = ("step", "phase", "bs", "tokens", "stat", "latency_ms", "used", "free", "wait", "run",
              "finished", "preempted")
    lines = [header]
    for row in rows[:limit]:
        lines.append((str(row.step), row.phase, str(row.batch_size), _opt(row.num_batched_tokens),
                      str(row.num_tokens_stat), f"{row.latency_ms:.2f}", str(row.used_blocks),
                      str(row.free_blocks), str(row.waiting_len), str(row.running_len),
                      _ids(row.finished), _ids(row.preempted)))
    text = _columns(lines, left={"phase", "finished", "preempted"})
    if limit is not None and len(rows) > limit:
        text += f"\n... {len(rows) - limit} more steps"
    return text


def format_request_table(rows: list[RequestRow]) -> str:
    """The per-request table as fixed-width text (steps are ``@step``, durations in ms)."""
    header = ("seq", "prompt", "max", "enqueue@", "sched@", "1st_tok@", "finish@", "reason", "tokens",
              "preempt", "ttft_ms", "tpot_ms", "e2e_ms")
    lines = [header]
    for r in rows:
        lines.append((str(r.seq_id), str(r.prompt_len), str(r.max_tokens), str(r.enqueue_step),
                      _opt(r.first_scheduled_step), _opt(r.first_token_step), _opt(r.finish_step),
                      r.finish_reason or "-", str(r.num_completion_tokens), str(r.num_preemptions),
                      _opt(r.ttft_ms), _opt(r.tpot_ms), _opt(r.e2e_ms)))
    return _columns(lines, left={"reason"})


def _ids(ids: list[int]) -> str:
    return ",".join(map(str, ids)) if ids else "-"


def _opt(value: int | float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _columns(lines: list[tuple[str, ...]], left: set[str]) -> str:
    """Align columns: words (the ``left`` columns) to the left, numbers to the right."""
    widths = [max(len(line[c]) for line in lines) for c in range(len(lines[0]))]
    flush_left = [name in left for name in lines[0]]
    return "\n".join("  ".join(cell.ljust(w) if is_left else cell.rjust(w)
                               for cell, w, is_left in zip(line, widths, flush_left)).rstrip()
                     for line in lines)
