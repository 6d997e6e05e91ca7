"""Tables derived from a trace's events alone: one row per engine step, one row per request, and the spans
each request spent waiting / prefilling / decoding.

Part of the torch-free trace layer. The tables read the engine state from the one interpreter of events
(``state.walk``), in a single pass; they never call back into ``Trace``.

Where the numbers come from:

- a step row is its STEP_DONE event (phase, batch, latency, blocks, queues, finished), completed by the
  step's SCHEDULE_PREFILL / SCHEDULE_DECODE (tokens computed, partial prefill chunks), PREEMPT and
  PREFIX_CACHE_HIT events. A step without STEP_DONE (the run crashed inside it) has no row.
- the step convention every picture follows: step N is the stretch of time the step ran. Its batch, its
  tokens and what it held while it ran (``held_blocks``, ``waiting_in_step``, ``running_in_step``: the
  state the scheduler left when it emitted the step's SCHEDULE_* event) belong to step N; what the step
  freed when its requests finished shows only *after* it. STEP_DONE's ``used_blocks`` / ``free_blocks`` /
  ``waiting_len`` / ``running_len`` are the state at the end of the step, after those frees: the value
  the next step starts from.
- a request row starts at REQUEST_ENQUEUE, its arrival that event's ``since_arrival_ms`` before it (a served
  request waits in the server's front end, or for the next scheduling step; absent, and in traces before
  version 4: it arrived as it joined). TTFT and end-to-end latency count from the arrival, as a serving
  benchmark's do; ``enqueue_ttft_ms`` is the part the engine saw, from its enqueue. Every completed step that
  ran the sequence gave it one new token, except a prefill step that computed only a chunk of its prompt; that
  count is the request's completion tokens, and the first such step is when its first token appeared.
  STATE_TRANSITION to FINISHED gives the finish step and reason, PREEMPT the preemptions.
- a token is "out" when its step ends, so first-token and finish times are step end times (TTFT, TPOT and
  end-to-end latency follow the engine's view: a token exists once ``step()`` returns it).
- times that are a step's start or end are only known at the step's STEP_DONE: the pass fills them in
  then (or with the event's own time, if the step never completed).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable

from msgspec import UNSET

from nanovllm_teach.trace.schema import TraceEvent
from nanovllm_teach.trace.state import EngineSettings, EngineState, ends_a_step, walk


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
    # nano-vllm's signed stat: prefill = total length of its sequences after their new
    # token, decode = minus the number of sequences.
    num_tokens_stat: int
    latency_ms: float
    used_blocks: int  # at the end of the step (after its finished requests freed their blocks)
    free_blocks: int
    waiting_len: int  # at the end of the step
    running_len: int
    # While the step ran (after its scheduling, before its finished requests left): what the pictures
    # draw over step N, so that a request's blocks last exactly as long as its bar in the Gantt chart.
    held_blocks: int
    waiting_in_step: int
    running_in_step: int
    finished: list[int]
    preempted: list[int]
    prefix_hit_seq_ids: list[int]
    num_cached_tokens: int  # prompt tokens served from the prefix cache in this step
    chunked: list[int]  # sequences that computed only part of their prompt and continue next step
    t_start_ns: int  # STEP_DONE time minus the step's own measured latency (never before the last step's end)
    t_end_ns: int  # STEP_DONE time
    bound: str | None  # simulated runs: what bounds the predicted step time (compute, memory, launch)


@dataclass(slots=True)
class RequestRow:
    """One request, from enqueue to finish. Times are ns since the trace began; ``*_ms`` are durations."""

    seq_id: int
    prompt_len: int
    max_tokens: int
    temperature: float
    arrival_t_ns: int  # when it arrived: its enqueue, unless it waited outside the engine (REQUEST_ENQUEUE's
    # since_arrival_ms: a server's front end, an admission wait; traces before version 4 do not say)
    enqueue_t_ns: int
    enqueue_step: int  # the first engine step that ran after the request was enqueued
    first_scheduled_step: int | None
    first_scheduled_t_ns: int | None
    first_token_step: int | None
    first_token_t_ns: int | None
    finish_step: int | None
    finish_t_ns: int | None
    finish_reason: str | None  # eos, length, max_model_len, stop, aborted; None while unfinished
    num_completion_tokens: int
    num_preemptions: int
    num_cached_tokens: int  # prompt tokens served from the prefix cache, summed over admissions
    ttft_ms: float | None  # arrival -> first token (the serving benchmarks' TTFT)
    enqueue_ttft_ms: float | None  # enqueue -> first token: the part of the TTFT the engine itself saw
    tpot_ms: float | None  # mean time per output token after the first
    e2e_ms: float | None  # arrival -> finish


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
class Tables:
    """What ``derive_tables`` returns (``Trace.steps``, ``Trace.requests``, ``Trace.spans``)."""

    steps: list[StepRow]
    requests: list[RequestRow]
    spans: list[RequestSpan]


# A time that is a step's start or end is known only once the pass has seen that step's STEP_DONE (or the
# end of the trace, if the step never completed): such times are filled in after the pass.
_Fixup = Callable[[dict[int, StepRow]], None]


class _Builder:
    """The single pass: rows so far, each request's open span, and the times still to fill in."""

    def __init__(self) -> None:
        self.in_step: tuple[int, int, int] | None = None  # (held blocks, waiting, running) as the step ran
        self.steps: list[StepRow] = []
        self.requests: dict[int, RequestRow] = {}
        self.spans: list[RequestSpan] = []
        self.open: dict[int, RequestSpan] = {}
        self.fixups: list[_Fixup] = []
        self.tokens: Counter[int] = Counter()  # seq -> tokens the completed steps gave it
        self.first_token: dict[int, tuple[int, int]] = {}  # seq -> (step, t_ns) of its first token
        self.last_step = 0  # the latest completed step, to place events between steps

    def switch(self, sid: int, state: str | None, t_ns: int, step: int) -> None:
        """Close ``sid``'s open span at (t_ns, step) and, unless ``state`` is None, open one in ``state``."""
        current = self.open.pop(sid, None)
        if current is not None:
            current.t_end_ns, current.step_end = t_ns, step
            self.spans.append(current)
        if state is not None:
            self.open[sid] = RequestSpan(sid, state, t_ns, t_ns, step, step)

    def switch_at_step_start(self, sid: int, state: str, e: TraceEvent) -> None:
        """``switch`` at the start of ``e``'s step (its SCHEDULE_* event's time if it never completed)."""
        closing = self.open.get(sid)
        self.switch(sid, state, e.t_ns, e.step)
        opened = self.open[sid]

        def fix(rows: dict[int, StepRow]) -> None:
            row = rows.get(e.step)
            if row is not None:
                opened.t_start_ns = row.t_start_ns  # its end is set when it closes
                if closing is not None:
                    closing.t_end_ns = row.t_start_ns
        self.fixups.append(fix)


def derive_tables(events: list[TraceEvent], settings: EngineSettings) -> Tables:
    """The step, request and span tables of a trace, in one pass over its events."""
    b = _Builder()
    for e, state in walk(events, settings):
        name = e.event
        s = e.stats
        if ends_a_step(e):
            _step_done(b, e, state)
        elif name == "REQUEST_ENQUEUE":
            b.requests[s.seq_id] = RequestRow(
                seq_id=s.seq_id, prompt_len=s.prompt_len, max_tokens=s.max_tokens, temperature=s.temperature,
                arrival_t_ns=e.t_ns - (0 if s.since_arrival_ms is UNSET else round(s.since_arrival_ms * 1e6)),
                enqueue_t_ns=e.t_ns, enqueue_step=b.last_step + 1, first_scheduled_step=None,
                first_scheduled_t_ns=None, first_token_step=None, first_token_t_ns=None, finish_step=None,
                finish_t_ns=None, finish_reason=None, num_completion_tokens=0, num_preemptions=0,
                num_cached_tokens=0, ttft_ms=None, enqueue_ttft_ms=None, tpot_ms=None, e2e_ms=None)
            b.switch(s.seq_id, "waiting", e.t_ns, b.last_step + 1)
        elif name == "SCHEDULE_PREFILL":
            b.in_step = (len(state.holders), len(state.waiting), len(state.running))
            _schedule_prefill(b, e)
        elif name == "SCHEDULE_DECODE":
            b.in_step = (len(state.holders), len(state.waiting), len(state.running))
            for sid in s.seq_ids:
                if sid in b.open and b.open[sid].state == "prefill":
                    b.switch_at_step_start(sid, "decode", e)
        elif name == "PREEMPT":
            if s.seq_id in b.requests:
                b.requests[s.seq_id].num_preemptions += 1
            if s.seq_id in b.open:
                b.switch(s.seq_id, "waiting", e.t_ns, e.step)
        elif name == "PREFIX_CACHE_HIT" and s.seq_id in b.requests:
            b.requests[s.seq_id].num_cached_tokens += s.num_cached_tokens
        elif name == "STATE_TRANSITION" and s.to == "FINISHED":
            _finished(b, e)
    end_t = events[-1].t_ns if events else 0
    for sid in list(b.open):  # spans still open when the trace ends close at its last event
        b.switch(sid, None, end_t, b.last_step + 1)
    rows_by_step = {row.step: row for row in b.steps}
    for fix in b.fixups:
        fix(rows_by_step)
    for req in b.requests.values():
        req.num_completion_tokens = b.tokens.get(req.seq_id, 0)
        if req.num_completion_tokens:
            req.first_token_step, req.first_token_t_ns = b.first_token[req.seq_id]
        req.ttft_ms = _ms(req.arrival_t_ns, req.first_token_t_ns)
        req.enqueue_ttft_ms = _ms(req.enqueue_t_ns, req.first_token_t_ns)
        req.e2e_ms = _ms(req.arrival_t_ns, req.finish_t_ns)
        n = req.num_completion_tokens
        if req.finish_t_ns is not None and req.first_token_t_ns is not None and n > 1:
            req.tpot_ms = (req.finish_t_ns - req.first_token_t_ns) / 1e6 / (n - 1)
    return Tables(b.steps, [b.requests[sid] for sid in sorted(b.requests)], b.spans)


def _schedule_prefill(b: _Builder, e: TraceEvent) -> None:
    for sid in e.stats.seq_ids:
        req = b.requests.get(sid)
        if req is not None and req.first_scheduled_step is None:
            req.first_scheduled_step, req.first_scheduled_t_ns = e.step, e.t_ns

            def fix(rows: dict[int, StepRow], req: RequestRow = req) -> None:
                if e.step in rows:
                    req.first_scheduled_t_ns = rows[e.step].t_start_ns
            b.fixups.append(fix)
        # A chunked prompt is scheduled in several steps but is one prefill span.
        if sid in b.open and b.open[sid].state == "waiting":
            b.switch_at_step_start(sid, "prefill", e)


def _finished(b: _Builder, e: TraceEvent) -> None:
    """A FINISHED transition: at its step's end, or when recorded (between steps, or in a step that never
    completed)."""
    s = e.stats
    req = b.requests.get(s.seq_id)
    if req is not None:
        req.finish_step, req.finish_t_ns = e.step, e.t_ns
        req.finish_reason = s.get("finish_reason", e.reason)
    closing = b.open.get(s.seq_id)
    if closing is not None:
        b.switch(s.seq_id, None, e.t_ns, e.step if e.step is not None else b.last_step + 1)
    if e.step is None:
        return

    def fix(rows: dict[int, StepRow]) -> None:
        row = rows.get(e.step)
        if row is None:
            return
        if req is not None:
            req.finish_t_ns = row.t_end_ns
        if closing is not None:
            closing.t_end_ns, closing.step_end = row.t_end_ns, row.step + 1
    b.fixups.append(fix)


def _step_done(b: _Builder, e: TraceEvent, state: EngineState) -> None:
    s = e.stats
    parts = state.done
    schedule = parts.schedule
    # The step began its own latency before STEP_DONE; the clamp keeps µs rounding of latency_ms from
    # overlapping it with the step before (timeline viewers need slices on a track not to overlap).
    t_start = e.t_ns - round(s.latency_ms * 1e6)
    if b.steps:
        t_start = max(t_start, b.steps[-1].t_end_ns)
    chunked = ([sid for sid, flag in zip(schedule.stats.seq_ids, schedule.stats.chunked) if flag]
               if schedule is not None and schedule.event == "SCHEDULE_PREFILL" else [])
    # A trace without the step's SCHEDULE_* event (a damaged one) says only how the step ended.
    held, waiting, running = b.in_step or (s.used_blocks, s.waiting_len, s.running_len + len(s.finished))
    b.in_step = None
    b.steps.append(StepRow(
        step=e.step, phase=e.phase, batch_size=s.batch_size, seq_ids=list(s.seq_ids),
        num_batched_tokens=schedule.stats.num_batched_tokens if schedule is not None else None,
        num_tokens_stat=s.num_tokens_stat, latency_ms=s.latency_ms, used_blocks=s.used_blocks,
        free_blocks=s.free_blocks, waiting_len=s.waiting_len, running_len=s.running_len,
        held_blocks=held, waiting_in_step=waiting, running_in_step=running, finished=list(s.finished),
        preempted=[p.stats.seq_id for p in parts.preempts],
        prefix_hit_seq_ids=[h.stats.seq_id for h in parts.hits],
        num_cached_tokens=sum(h.stats.num_cached_tokens for h in parts.hits), chunked=chunked,
        t_start_ns=t_start, t_end_ns=e.t_ns, bound=s.get("bound")))
    b.last_step = e.step
    # Every sequence the step ran got one new token, except a prompt chunk that did not complete it. (Set and
    # Counter operations run in C: this sees every (step, sequence) pair of a long trace.)
    b.tokens.update(s.seq_ids)
    if chunked:
        b.tokens.subtract(chunked)
    for sid in set(s.seq_ids).difference(b.first_token, chunked):
        b.first_token[sid] = (e.step, e.t_ns)


def _ms(t0: int | None, t1: int | None) -> float | None:
    return None if t0 is None or t1 is None else (t1 - t0) / 1e6


def format_step_table(rows: list[StepRow], limit: int | None = None) -> str:
    """The per-step table as fixed-width text (one line per step; ``limit`` keeps the first rows).

    ``bs``, ``tokens`` and ``held`` (KV blocks held) are the step as it ran, as the pictures draw it;
    ``used``, ``free``, ``wait``, ``run`` are STEP_DONE's: the state at the end of the step, after the
    requests in ``finished`` freed their blocks (what the next step starts from)."""
    header = ("step", "phase", "bs", "tokens", "stat", "latency_ms", "held", "used", "free", "wait", "run",
              "finished", "preempted")
    lines = [header]
    for row in rows[:limit]:
        lines.append((str(row.step), row.phase, str(row.batch_size), _opt(row.num_batched_tokens),
                      str(row.num_tokens_stat), f"{row.latency_ms:.2f}", str(row.held_blocks), str(row.used_blocks),
                      str(row.free_blocks), str(row.waiting_len), str(row.running_len),
                      _ids(row.finished), _ids(row.preempted)))
    text = _columns(lines, left={"phase", "finished", "preempted"})
    if limit is not None and len(rows) > limit:
        text += f"\n... {len(rows) - limit} more steps"
    return text


def format_request_table(rows: list[RequestRow], limit: int | None = None) -> str:
    """The per-request table as fixed-width text (steps are ``@step``, durations in ms; ``limit`` keeps the
    first rows)."""
    header = ("seq", "prompt", "max", "enqueue@", "sched@", "1st_tok@", "finish@", "reason", "tokens",
              "preempt", "ttft_ms", "tpot_ms", "e2e_ms")
    lines = [header]
    for r in rows[:limit]:
        lines.append((str(r.seq_id), str(r.prompt_len), str(r.max_tokens), str(r.enqueue_step),
                      _opt(r.first_scheduled_step), _opt(r.first_token_step), _opt(r.finish_step),
                      r.finish_reason or "-", str(r.num_completion_tokens), str(r.num_preemptions),
                      _opt(r.ttft_ms), _opt(r.tpot_ms), _opt(r.e2e_ms)))
    text = _columns(lines, left={"reason"})
    if limit is not None and len(rows) > limit:
        text += f"\n... {len(rows) - limit} more requests"
    return text


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
