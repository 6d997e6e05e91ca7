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

Every sentence exists in English and Chinese (``Text``, whole sentences per language: "第 7 步：你把序列
[3, 5] 调度去解码，参考实现把序列 [3, 5, 6] 调度去解码"), said in the language chosen when the
divergence is found (``lang``, else ``i18n.resolve_lang``).

Part of the torch-free trace layer: standard library and ``i18n`` only; emits no event. What the sentences
know about each event comes from the event contract (``events.py``): its volatile fields, what the engine did in it
(``Payload.did`` and the stats it shows, ``told_by``), whether it was done to a sequence
(``acts_on_sequence``) and whether it is a decision (``decision``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from nanovllm_teach.i18n import Text, resolve_lang, say
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



# ---- the sentences, in both languages ------------------------------------------------------------------
# Each is a whole sentence per language: Chinese puts its words in its own order ("第 7 步：参考实现抢占了序列 4
# （释放块 [9, 10]），你没有"), so no English-shaped fragment is glued into it. ``a``/``b`` are the two traces
# as subjects, ``did_a``/``did_b`` what each did (``Payload.did``).

# Where: in the reference's event (in yours when the reference has run out).
AT_STEP = Text(en="step {step}", zh="第 {step} 步")
AT_START_UP = Text(en="at start-up", zh="启动时")
BETWEEN_STEPS = Text(en="between steps", zh="两步之间")
IN_THE_HEADER = Text(en="in the header", zh="trace 头部")

# The grader's voice: the first trace is the student's, the second the reference engine's.
GRADER_WORDS: dict[str, Text] = {
    "a": Text(en="you", zh="你"), "b": Text(en="the reference", zh="参考实现"),
    "a_trace": Text(en="your trace", zh="你的 trace"), "b_trace": Text(en="the reference trace", zh="参考实现的 trace"),
    "a_alone": Text(en="yours", zh="你的 trace"), "b_it": Text(en="it", zh="它"),
}
# Two runs by name: "A", "A's trace".
VOICE_HALF_NAMED = Text(en="a voice names both traces or neither, got a={a!r}, b={b!r}",
                        zh="Voice 要么给两个 trace 都起名，要么都不起名，收到的是 a={a!r}, b={b!r}")
NAMED_TRACE = Text(en="{name}'s trace", zh="{name} 的 trace")
NAMED_ALONE = Text(en="{name}", zh="{name} 的 trace")

HEADERS_DIFFER = Text(
    en="before the first event, the trace headers differ at {key}: {a} had {mine}, {b} {theirs} (the runs used "
       "different settings)",
    zh="还没到第一个事件，两份 trace 的头部就在 {key} 处不同：{a}的是 {mine}，{b}的是 {theirs}（两次运行用了不同的设置）")
NOTHING = Text(en="(nothing)", zh="无")

YOURS_ENDS = Text(en="{where}: {a_trace} ends here, {b} goes on: {b_it} {did} ({event})",
                  zh="{where}：{a_trace} 到此结束，{b}还在继续：{b_it}{did}（{event}）")
THEIRS_ENDS = Text(en="{where}: {b_trace} ends here, {a_alone} goes on: {a} {did} ({event})",
                   zh="{where}：{b_trace} 到此结束，{a_alone} 还在继续：{a}{did}（{event}）")

ONLY_B_DID = Text(en="{where}: {b} {did_b}, {a} did not", zh="{where}：{b}{did_b}，{a}没有")
ONLY_A_DID = Text(en="{where}: {a} {did_a}, {b} did not", zh="{where}：{a}{did_a}，{b}没有")
A_DID_B_ELSE = Text(en="{where}: {a} {did_a}, {b} did not ({b_it} {did_b} instead)",
                    zh="{where}：{a}{did_a}，{b}没有这样做（{b_it}在这里{did_b}）")
B_DID_A_ELSE = Text(en="{where}: {b} {did_b}, {a} did not ({a} {did_a} instead)",
                    zh="{where}：{b}{did_b}，{a}没有这样做，而是{did_a}")
EACH_DID = Text(en="{where}: {b} {did_b}, {a} {did_a} instead", zh="{where}：{b}{did_b}，{a}则{did_a}")

BOTH_DID = Text(en="{where}: {a} {did_a}, {b} {did_b}", zh="{where}：{a}{did_a}，{b}{did_b}")
SAMPLED = Text(en="{where}: {a} sampled token {mine} for seq {seq_id}, {b} sampled token {theirs}",
               zh="{where}：{a}为序列 {seq_id} 采样了 token {mine}，{b}采样的是 token {theirs}")
FIELD_WROTE = Text(en="{where}, {event}.{field}: {a} wrote {mine}, {b} {theirs}{more}",
                   zh="{where}，{event}.{field}：{a}写入的是 {mine}，{b}写入的是 {theirs}{more}")
FIELD_HAD = Text(en="{where}, {event}.{field}: {a} had {mine}, {b} {theirs}{more}",
                 zh="{where}，{event}.{field}：{a}的值是 {mine}，{b}的是 {theirs}{more}")
MORE_FIELDS = Text(en=" (and {count} more: {fields})", zh="（另有 {count} 个字段不同：{fields}）")
FIRST_DIFFERENCE = Text(en=" (first difference at position {first} of {length})",
                        zh="（第一处不同在下标 {first}，共 {length} 个）")
LIST_SEPARATOR = Text(en=", ", zh="、")

_CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


@dataclass(frozen=True, slots=True)
class Voice:
    """Who the sentences speak of: the grader's "you" and "the reference" (no names), or two runs by name
    ("A had ..., B had ...")."""

    a: str | None = None  # the first trace's name (None: "you")
    b: str | None = None  # the second's (None: "the reference")

    def __post_init__(self) -> None:
        if (self.a is None) != (self.b is None):
            raise ValueError(say(VOICE_HALF_NAMED, a=self.a, b=self.b))

    @classmethod
    def named(cls, a: str, b: str) -> "Voice":
        """Neutral sentences for two ordinary runs: "A had ..., B had ..."."""
        return cls(a, b)

    def words(self, lang: str) -> dict[str, str]:
        """Every way a sentence names the two traces, in ``lang``: ``a`` and ``b`` as subjects, ``a_trace``
        and ``b_trace`` ("your trace"), ``a_alone`` ("yours"), ``b_it`` (the second said again: "it")."""
        if self.a is None:
            words = {role: say(text, lang) for role, text in GRADER_WORDS.items()}
        else:
            words = {"a": self.a, "b": self.b, "a_trace": say(NAMED_TRACE, lang, name=self.a),
                     "b_trace": say(NAMED_TRACE, lang, name=self.b), "a_alone": say(NAMED_ALONE, lang, name=self.a),
                     "b_it": self.b}
        if lang == "zh":
            # A Chinese sentence puts its verb right after the subject (你抢占了…); a name in Latin letters is
            # set off from it by a space (A 抢占了…), as Chinese technical writing spaces Latin words.
            for role in ("a", "b", "b_it"):
                if words[role] and not _CJK.match(words[role][-1]):
                    words[role] += " "
        return words


GRADER = Voice()


@dataclass(frozen=True)
class Divergence:
    """The first place two traces disagree.

    ``index`` is the position in both event lists (None when the headers already differ); ``step``,
    ``where`` ("step 7", "at start-up", "between steps", "in the header", in the language of the sentence)
    and ``event`` locate it in the reference (in yours when the reference has run out); ``fields`` are the
    differing fields when both events are of the same kind; ``message`` says it all in one sentence.
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
                ignore: frozenset[str] = VOLATILE, voice: Voice = GRADER, lang: str | None = None) -> Divergence | None:
    """The first divergence between two traces (files or loaded ``Trace`` objects), or None if they agree
    on every field outside ``ignore``. Sentences speak of the first trace as "you" and the second as "the
    reference" (the grader's voice); ``voice=Voice.named("A", "B")`` names two ordinary runs instead. They
    are said in ``lang`` (None: the chosen language, ``i18n``)."""
    lang = resolve_lang(lang)
    a = yours if isinstance(yours, Trace) else load_trace(yours)
    b = reference if isinstance(reference, Trace) else load_trace(reference)
    header = _header_divergence(a.header, b.header, ignore, voice, lang)
    if header is not None:
        return header
    for index in range(max(len(a.events), len(b.events))):
        mine = a.events[index] if index < len(a.events) else None
        ref = b.events[index] if index < len(b.events) else None
        if mine is None or ref is None:
            return _ended(index, mine, ref, voice, lang)
        if mine.event != ref.event:
            following = (a.events[index + 1] if index + 1 < len(a.events) else None,
                         b.events[index + 1] if index + 1 < len(b.events) else None)
            return _different_kinds(index, mine, ref, following, ignore, voice, lang)
        fields = _differing_fields(mine, ref, ignore)
        if fields:
            return _same_kind(index, mine, ref, fields, voice, lang)
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


_ABSENT = object()  # a key one header lacks


def _header_divergence(a: dict[str, Any], b: dict[str, Any], ignore: frozenset[str],
                       voice: Voice, lang: str) -> Divergence | None:
    """Traces recorded with different settings (or workloads) disagree before their first event."""
    flat_a, flat_b = _flatten(a, "header"), _flatten(b, "header")
    for path in list(flat_b) + [p for p in flat_a if p not in flat_b]:
        # ``header.versions`` ignores every ``header.versions.*`` key.
        if any(path == entry or path.startswith(entry + ".") for entry in ignore):
            continue
        mine, ref = flat_a.get(path, _ABSENT), flat_b.get(path, _ABSENT)
        if mine != ref:
            shown = [say(NOTHING, lang) if value is _ABSENT else show(value) for value in (mine, ref)]
            message = say(HEADERS_DIFFER, lang, key=path[len("header."):], mine=shown[0], theirs=shown[1],
                          **voice.words(lang))
            return Divergence(message, None, None, say(IN_THE_HEADER, lang), None, (path,), None, None)
    return None


# ---- how an event reads -------------------------------------------------------------------------------

def _where(e: TraceEvent, lang: str) -> str:
    if e.step is not None:
        return say(AT_STEP, lang, step=e.step)
    return say(AT_START_UP if e.phase in ("bootstrap", "init") else BETWEEN_STEPS, lang)


def _show_pair(a: Any, b: Any, lang: str) -> tuple[str, str]:
    """Both values; two long lists of one length show only a window around their first difference."""
    if not (isinstance(a, list) and isinstance(b, list) and len(a) == len(b) > MAX_SHOWN):
        return show(a), show(b)
    first = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
    lo, hi = max(0, first - 3), min(len(a), first + 4)

    def window(values: list[Any]) -> str:
        return ("[" + ("…, " if lo > 0 else "") + ", ".join(map(show, values[lo:hi]))
                + (", …" if hi < len(values) else "") + "]")
    return window(a), window(b) + say(FIRST_DIFFERENCE, lang, first=first, length=len(a))


def describe_event(e: TraceEvent, lang: str | None = None) -> str:
    """What the engine did in event ``e``, as a verb phrase in ``lang`` (None: the chosen language):
    "preempted seq 4 (freeing blocks [9, 10])" / "抢占了序列 4（释放块 [9, 10]）" (the phrase is the
    event's own: ``Payload.did``)."""
    return e.stats.did(e.reason, lang)


def _ended(index: int, mine: TraceEvent | None, ref: TraceEvent | None, voice: Voice, lang: str) -> Divergence:
    words = voice.words(lang)
    if mine is None:
        where = _where(ref, lang)
        message = say(YOURS_ENDS, lang, where=where, did=describe_event(ref, lang), event=ref.event, **words)
        return Divergence(message, index, ref.step, where, ref.event, (), None, ref)
    where = _where(mine, lang)
    message = say(THEIRS_ENDS, lang, where=where, did=describe_event(mine, lang), event=mine.event, **words)
    return Divergence(message, index, mine.step, where, mine.event, (), mine, None)


def _is_preemption(e: TraceEvent) -> bool:
    return e.event == "PREEMPT" or (e.event == "BLOCK_FREE" and e.reason == "preempted")


def _different_kinds(index: int, mine: TraceEvent, ref: TraceEvent, following: tuple[TraceEvent | None,
                     TraceEvent | None], ignore: frozenset[str], voice: Voice, lang: str) -> Divergence:
    """Two runs did different things here. Said from the side of the one that did the notable thing: one
    event more or less with everything after it lining up, else a preemption, else any block or state
    change."""
    where = _where(ref, lang)
    next_mine, next_ref = following

    def same(x: TraceEvent | None, y: TraceEvent | None) -> bool:
        return x is not None and y is not None and x.event == y.event and not _differing_fields(x, y, ignore)

    if same(mine, next_ref):
        sentence = ONLY_B_DID
    elif same(next_mine, ref):
        sentence = ONLY_A_DID
    elif _is_preemption(mine) and not _is_preemption(ref):
        sentence = A_DID_B_ELSE
    elif ref.stats.acts_on_sequence:
        sentence = B_DID_A_ELSE
    elif mine.stats.acts_on_sequence:
        sentence = A_DID_B_ELSE
    else:
        sentence = EACH_DID
    message = say(sentence, lang, where=where, did_a=describe_event(mine, lang), did_b=describe_event(ref, lang),
                  **voice.words(lang))
    return Divergence(message, index, ref.step, where, ref.event, (), mine, ref)


def _first_sample_difference(mine: dict[str, Any], ref: dict[str, Any]) -> tuple[int, int, int] | None:
    """(seq, your token, the reference's token) for the first sequence both sampled for that got different
    tokens, when both sampled for the same sequences."""
    if mine.get("seq_ids") != ref.get("seq_ids") or len(mine.get("token_ids", [])) != len(ref.get("token_ids", [])):
        return None
    for seq_id, a, b in zip(ref["seq_ids"], mine["token_ids"], ref["token_ids"]):
        if a != b:
            return seq_id, a, b
    return None


def _same_kind(index: int, mine: TraceEvent, ref: TraceEvent, fields: tuple[str, ...],
               voice: Voice, lang: str) -> Divergence:
    where, words = _where(ref, lang), voice.words(lang)
    message = None
    sampled = _first_sample_difference(mine.stats, ref.stats) if ref.event == "SAMPLE" else None
    if sampled is not None:
        seq_id, a, b = sampled
        message = say(SAMPLED, lang, where=where, seq_id=seq_id, mine=a, theirs=b, **words)
    elif set(fields) & ref.stats.told_by:
        yours_text, ref_text = describe_event(mine, lang), describe_event(ref, lang)
        if yours_text != ref_text:
            message = say(BOTH_DID, lang, where=where, did_a=yours_text, did_b=ref_text, **words)
    if message is None:
        # Field by field: the first differing field, and how many more there are.
        name = fields[0]
        a = getattr(mine, name) if name in ("phase", "step", "reason") else mine.stats.get(name, _ABSENT)
        b = getattr(ref, name) if name in ("phase", "step", "reason") else ref.stats.get(name, _ABSENT)
        if a is _ABSENT or b is _ABSENT:
            shown_a, shown_b = (say(NOTHING, lang) if v is _ABSENT else show(v) for v in (a, b))
        else:
            shown_a, shown_b = _show_pair(a, b, lang)
        more = (say(MORE_FIELDS, lang, count=len(fields) - 1, fields=say(LIST_SEPARATOR, lang).join(fields[1:]))
                if len(fields) > 1 else "")
        sentence = FIELD_WROTE if ref.event.startswith("PREPARE_") else FIELD_HAD
        message = say(sentence, lang, where=where, event=ref.event, field=name, mine=shown_a, theirs=shown_b,
                      more=more, **words)
    return Divergence(message, index, ref.step, where, ref.event, fields, mine, ref)


# ---- decisions only -----------------------------------------------------------------------------------

# What the scheduler and the block manager decided: who runs each step, which blocks, preemptions, cache hits
# (the events whose payload type declares ``decision``).
DECISION_EVENTS: tuple[str, ...] = events_where(lambda payload: payload.decision)
# Who runs each step, the decision every other one in the step follows from (a scheduling decision about the
# whole batch, not about one sequence): where two runs with other settings part ways is said best by these.
BATCH_DECISIONS: tuple[str, ...] = events_where(
    lambda payload: payload.decision and payload.actor == "Scheduler" and not payload.acts_on_sequence)
# A request that the real model ended at max_tokens and the simulated one ended at the same token with EOS
# finishes in the same step for another reason: finishing transitions are compared without it and its token.
_DECISION_IGNORE = VOLATILE | {"reason", "STATE_TRANSITION.token_id", "STATE_TRANSITION.finish_reason"}


def diff_decisions(yours: Trace | str | Path, reference: Trace | str | Path,
                   events: tuple[str, ...] = DECISION_EVENTS, ignore: frozenset[str] = _DECISION_IGNORE,
                   voice: Voice = GRADER, lang: str | None = None) -> Divergence | None:
    """The first divergence between two runs' decisions (``events``, in order), whatever else differs:
    headers, times and every other event are left out. By default finish reasons are too (``ignore``), so a
    simulated run and a real run of one workload (given the real run's output lengths) agree here; the
    grader compares them (``ignore=VOLATILE``). The divergence's ``index`` counts the kept events only;
    its ``yours`` and ``reference`` are the events as the traces hold them (their own ``i``)."""
    kept, chosen = [], []
    for trace in (yours, reference):
        loaded = trace if isinstance(trace, Trace) else load_trace(trace)
        chosen.append([e for e in loaded.events if e.event in events])
        kept.append(Trace({}, [TraceEvent(i, 0, e.event, e.phase, e.step, e.reason, e.stats)
                               for i, e in enumerate(chosen[-1])]))
    divergence = diff_traces(kept[0], kept[1], ignore=ignore, voice=voice, lang=lang)
    if divergence is None:
        return None
    mine, theirs = (None if event is None else events_of[event.i]
                    for event, events_of in zip((divergence.yours, divergence.reference), chosen))
    return replace(divergence, yours=mine, reference=theirs)
