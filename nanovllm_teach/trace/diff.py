"""Trace diffing: where two TEACHING traces of the same workload first part ways, said in plain words.

Two runs of one workload on one engine make the same decisions in the same order, so their traces hold
the same events with the same stats — apart from how long things took and what this machine's memory
looked like. ``diff_traces(yours, reference)`` walks both event lists side by side, skips those
machine-dependent fields (``VOLATILE``), and reports the *first* event where the runs disagree::

    step 7: you scheduled seqs [3, 5] for decode, the reference scheduled seqs [3, 5, 6] for decode
    step 12: the reference preempted seq 4 (freeing blocks [9, 10]), you did not (...)
    step 3, PREPARE_DECODE_TENSORS.slot_mapping: you wrote [11, 274], the reference [11, 273]

Only the first divergence matters: everything after it follows from it (a different block handed out
changes every later block id). The autograder (``nanovllm_teach.exercises``) diffs a student's engine
against the reference engine this way, in its voice ("you", "the reference"); ``nanovllm-teach diff A B``
does it for any two trace files and names them instead (``Voice.named``: "run_a.jsonl had ..., run_b.jsonl
had ...").

Part of the torch-free trace layer: standard library only; emits no event. What the sentences know about
each event comes from the event contract (``events.py``): its volatile fields, what the engine did in it
(``Payload.did`` and the stats it shows, ``told_by``), whether it was done to a sequence
(``acts_on_sequence``) and whether it is a decision (``decision``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nanovllm_teach.trace.events import events_where, volatile_fields
from nanovllm_teach.trace.payload import MAX_SHOWN, show
from nanovllm_teach.trace.reader import Trace, load_trace
from nanovllm_teach.trace.schema import HEADER_VOLATILE, TraceEvent

# Fields that say how this machine ran, not what the engine decided, as the contract declares them (each
# payload field marked volatile, every event's clock, and the header keys of ``schema.HEADER_VOLATILE``).
# An entry is either a plain name (that field of every event, or that stats key in every event),
# ``EVENT.key`` (one event's stats key), or ``header.a.b`` (a key of the trace header, dotted into nested
# dicts).
VOLATILE: frozenset[str] = frozenset({"t_ns", *volatile_fields(), *(f"header.{key}" for key in HEADER_VOLATILE)})



@dataclass(frozen=True, slots=True)
class Voice:
    """Who the sentences speak of: the grader's "you" / "the reference", or two runs by name."""

    a: str  # the first trace as a subject: "you", "A"
    b: str  # the second: "the reference", "B"
    a_trace: str  # "your trace", "A's trace"
    b_trace: str
    a_alone: str  # the first trace on its own: "yours", "A"
    b_it: str  # the second, said again in one sentence: "it", "B"

    @classmethod
    def named(cls, a: str, b: str) -> "Voice":
        """Neutral sentences for two ordinary runs: "A had ..., B had ..."."""
        return cls(a, b, f"{a}'s trace", f"{b}'s trace", a, b)


GRADER = Voice("you", "the reference", "your trace", "the reference trace", "yours", "it")


@dataclass(frozen=True)
class Divergence:
    """The first place two traces disagree.

    ``index`` is the position in both event lists (None when the headers already differ); ``step``,
    ``where`` ("step 7", "at start-up", "between steps", "in the header") and ``event`` locate it in the
    reference (in yours when the reference has run out); ``fields`` are the differing fields when both
    events are of the same kind; ``message`` says it all in one sentence.
    """

    message: str
    index: int | None
    step: int | None
    where: str
    event: str | None
    fields: tuple[str, ...]
    yours: TraceEvent | None
    reference: TraceEvent | None

    def __str__(self) -> str:
        return self.message


def diff_traces(yours: Trace | str | Path, reference: Trace | str | Path,
                ignore: frozenset[str] = VOLATILE, voice: Voice = GRADER) -> Divergence | None:
    """The first divergence between two traces (files or loaded ``Trace`` objects), or None if they agree
    on every field outside ``ignore``. Sentences speak of the first trace as "you" and the second as "the
    reference" (the grader's voice); ``voice=Voice.named("A", "B")`` names two ordinary runs instead."""
    a = yours if isinstance(yours, Trace) else load_trace(yours)
    b = reference if isinstance(reference, Trace) else load_trace(reference)
    header = _header_divergence(a.header, b.header, ignore, voice)
    if header is not None:
        return header
    for index in range(max(len(a.events), len(b.events))):
        mine = a.events[index] if index < len(a.events) else None
        ref = b.events[index] if index < len(b.events) else None
        if mine is None or ref is None:
            return _ended(index, mine, ref, voice)
        if mine.event != ref.event:
            following = (a.events[index + 1] if index + 1 < len(a.events) else None,
                         b.events[index + 1] if index + 1 < len(b.events) else None)
            return _different_kinds(index, mine, ref, following, ignore, voice)
        fields = _differing_fields(mine, ref, ignore)
        if fields:
            return _same_kind(index, mine, ref, fields, voice)
    return None


# ---- which fields differ ------------------------------------------------------------------------------

def _ignored(name: str, event: str, ignore: frozenset[str]) -> bool:
    return name in ignore or f"{event}.{name}" in ignore


def _differing_fields(a: TraceEvent, b: TraceEvent, ignore: frozenset[str]) -> tuple[str, ...]:
    """The event fields, then the stats keys (in the reference's order), on which ``a`` and ``b`` differ."""
    fields = [name for name in ("phase", "step", "reason")
              if not _ignored(name, b.event, ignore) and getattr(a, name) != getattr(b, name)]
    keys = list(b.stats) + [k for k in a.stats if k not in b.stats]
    for key in keys:
        if _ignored(key, b.event, ignore):
            continue
        if key in a.stats and key in b.stats:
            if a.stats[key] != b.stats[key]:
                fields.append(key)
        elif not (f"{key}_shape" in a.stats and f"{key}_shape" in b.stats):
            # A tensor whose values only one recorder kept (detail budget) is not a difference.
            fields.append(key)
    return tuple(fields)


def _flatten(obj: dict[str, Any], prefix: str) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in obj.items():
        path = f"{prefix}.{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, path))
        else:
            flat[path] = value
    return flat


def _header_divergence(a: dict[str, Any], b: dict[str, Any], ignore: frozenset[str],
                       voice: Voice) -> Divergence | None:
    """Traces recorded with different settings (or workloads) disagree before their first event."""
    flat_a, flat_b = _flatten(a, "header"), _flatten(b, "header")
    for path in list(flat_b) + [p for p in flat_a if p not in flat_b]:
        # ``header.versions`` ignores every ``header.versions.*`` key.
        if any(path == entry or path.startswith(entry + ".") for entry in ignore):
            continue
        mine, ref = flat_a.get(path, "(nothing)"), flat_b.get(path, "(nothing)")
        if mine != ref:
            message = (f"before the first event, the trace headers differ at {path[len('header.'):]}: {voice.a} "
                       f"had {show(mine)}, {voice.b} {show(ref)} (the runs used different settings)")
            return Divergence(message, None, None, "in the header", None, (path,), None, None)
    return None


# ---- how an event reads -------------------------------------------------------------------------------

def _where(e: TraceEvent) -> str:
    if e.step is not None:
        return f"step {e.step}"
    return "at start-up" if e.phase in ("bootstrap", "init") else "between steps"


def _show_pair(a: Any, b: Any) -> tuple[str, str]:
    """Both values; two long lists of one length show only a window around their first difference."""
    if not (isinstance(a, list) and isinstance(b, list) and len(a) == len(b) > MAX_SHOWN):
        return show(a), show(b)
    first = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    lo, hi = max(0, first - 3), min(len(a), first + 4)

    def window(values: list[Any]) -> str:
        return ("[" + ("…, " if lo > 0 else "") + ", ".join(map(show, values[lo:hi]))
                + (", …" if hi < len(values) else "") + "]")
    return window(a), window(b) + f" (first difference at position {first} of {len(a)})"


def describe_event(e: TraceEvent) -> str:
    """What the engine did in event ``e``, as a verb phrase: "preempted seq 4 (freeing blocks [9, 10])"
    (the phrase is the event's own: ``Payload.did``)."""
    return e.stats.did(e.reason)


# ---- the sentences --------------------------------------------------------------------------------------

def _ended(index: int, mine: TraceEvent | None, ref: TraceEvent | None, voice: Voice) -> Divergence:
    v = voice
    if mine is None:
        message = (f"{_where(ref)}: {v.a_trace} ends here, {v.b} goes on: {v.b_it} {describe_event(ref)} "
                   f"({ref.event})")
        return Divergence(message, index, ref.step, _where(ref), ref.event, (), None, ref)
    message = (f"{_where(mine)}: {v.b_trace} ends here, {v.a_alone} goes on: {v.a} {describe_event(mine)} "
               f"({mine.event})")
    return Divergence(message, index, mine.step, _where(mine), mine.event, (), mine, None)


def _is_preemption(e: TraceEvent) -> bool:
    return e.event == "PREEMPT" or (e.event == "BLOCK_FREE" and e.reason == "preempted")


def _different_kinds(index: int, mine: TraceEvent, ref: TraceEvent, following: tuple[TraceEvent | None,
                     TraceEvent | None], ignore: frozenset[str], voice: Voice) -> Divergence:
    """Two runs did different things here. Said from the side of the one that did the notable thing: one
    event more or less with everything after it lining up, else a preemption, else any block or state
    change."""
    where = _where(ref)
    next_mine, next_ref = following

    def same(x: TraceEvent | None, y: TraceEvent | None) -> bool:
        return x is not None and y is not None and x.event == y.event and not _differing_fields(x, y, ignore)

    v, did_mine, did_ref = voice, describe_event(mine), describe_event(ref)
    if same(mine, next_ref):
        message = f"{where}: {v.b} {did_ref}, {v.a} did not"
    elif same(next_mine, ref):
        message = f"{where}: {v.a} {did_mine}, {v.b} did not"
    elif _is_preemption(mine) and not _is_preemption(ref):
        message = f"{where}: {v.a} {did_mine}, {v.b} did not ({v.b_it} {did_ref} instead)"
    elif ref.stats.acts_on_sequence:
        message = f"{where}: {v.b} {did_ref}, {v.a} did not ({v.a} {did_mine} instead)"
    elif mine.stats.acts_on_sequence:
        message = f"{where}: {v.a} {did_mine}, {v.b} did not ({v.b_it} {did_ref} instead)"
    else:
        message = f"{where}: {v.b} {did_ref}, {v.a} {did_mine} instead"
    return Divergence(message, index, ref.step, where, ref.event, (), mine, ref)


def _first_sample_difference(mine: dict[str, Any], ref: dict[str, Any], voice: Voice) -> str | None:
    """``you sampled token 57 for seq 3, the reference 12``, when both sampled for the same sequences."""
    if mine.get("seq_ids") != ref.get("seq_ids") or len(mine.get("token_ids", [])) != len(ref.get("token_ids", [])):
        return None
    for seq_id, a, b in zip(ref["seq_ids"], mine["token_ids"], ref["token_ids"]):
        if a != b:
            return f"{voice.a} sampled token {a} for seq {seq_id}, {voice.b} sampled token {b}"
    return None


def _same_kind(index: int, mine: TraceEvent, ref: TraceEvent, fields: tuple[str, ...],
               voice: Voice) -> Divergence:
    where = _where(ref)
    sentence = None
    if ref.event == "SAMPLE":
        sentence = _first_sample_difference(mine.stats, ref.stats, voice)
    if sentence is None and set(fields) & ref.stats.told_by:
        yours_text, ref_text = describe_event(mine), describe_event(ref)
        if yours_text != ref_text:
            sentence = f"{voice.a} {yours_text}, {voice.b} {ref_text}"
    if sentence is not None:
        return Divergence(f"{where}: {sentence}", index, ref.step, where, ref.event, fields, mine, ref)
    # Field by field: the first differing field, and how many more there are.
    name = fields[0]
    a = getattr(mine, name) if name in ("phase", "step", "reason") else mine.stats.get(name, "(nothing)")
    b = getattr(ref, name) if name in ("phase", "step", "reason") else ref.stats.get(name, "(nothing)")
    shown_a, shown_b = _show_pair(a, b)
    verb = "wrote" if ref.event.startswith("PREPARE_") else "had"
    more = f" (and {len(fields) - 1} more: {', '.join(fields[1:])})" if len(fields) > 1 else ""
    message = f"{where}, {ref.event}.{name}: {voice.a} {verb} {shown_a}, {voice.b} {shown_b}{more}"
    return Divergence(message, index, ref.step, where, ref.event, fields, mine, ref)


# ---- decisions only -----------------------------------------------------------------------------------

# What the scheduler and the block manager decided: who runs each step, which blocks, preemptions, cache hits
# (the events whose payload type declares ``decision``).
DECISION_EVENTS: tuple[str, ...] = events_where(lambda payload: payload.decision)
# A request that the real model ended at max_tokens and the simulated one ended at the same token with EOS
# finishes in the same step for another reason: finishing transitions are compared without it and its token.
_DECISION_IGNORE = VOLATILE | {"reason", "STATE_TRANSITION.token_id", "STATE_TRANSITION.finish_reason"}


def diff_decisions(yours: Trace | str | Path, reference: Trace | str | Path,
                   events: tuple[str, ...] = DECISION_EVENTS, ignore: frozenset[str] = _DECISION_IGNORE,
                   voice: Voice = GRADER) -> Divergence | None:
    """The first divergence between two runs' decisions (``events``, in order), whatever else differs:
    headers, times and every other event are left out. By default finish reasons are too (``ignore``), so a
    simulated run and a real run of one workload (given the real run's output lengths) agree here; the
    grader compares them (``ignore=VOLATILE``). The divergence's ``index`` counts the kept events only."""
    kept = []
    for trace in (yours, reference):
        loaded = trace if isinstance(trace, Trace) else load_trace(trace)
        chosen = [e for e in loaded.events if e.event in events]
        kept.append(Trace({}, [TraceEvent(i, 0, e.event, e.phase, e.step, e.reason, e.stats)
                               for i, e in enumerate(chosen)]))
    return diff_traces(kept[0], kept[1], ignore=ignore, voice=voice)
