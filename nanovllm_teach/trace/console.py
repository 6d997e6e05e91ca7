"""The console view of TEACHING events, in the shape of nano-vllm's teaching log:

    TEACHING/SCHEDULE_PREFILL | phase=prefill | reason=waiting 队列有可准入请求 | stats={engine_step=1, scheduled=2, ...}
    step#1 prefill done in 772.24ms num_tokens_stat=30 finished_this_step=[]
    decode 详单#1/3：bs=2 input_ids=[...] context_lens=[12, 18] slot_mapping=[11, 273] block_tables=[[0], [1]]

Part of the torch-free trace layer. The same ``ConsoleRenderer`` prints a live run (pass it to
``TraceRecorder(sinks=[...])``) and a loaded trace (``render_trace``), so replay reads exactly like the run.

Printing goes through a private structlog pipeline (filter by verbosity, render, ``PrintLogger``); the
global structlog configuration is left alone.

Verbosity (each event's payload type says from which level it shows: ``Payload.shown_from``):

- ``quiet``: lifecycle only: start-up, generate() start/finish, state transitions, preemptions, aborts;
- ``normal``: + enqueues, scheduling decisions, KV block events, one summary line per step;
- ``detail``: + the execution events (tensor preparation, forward pass, sampling) of every prefill step
  and of the first ``decode_details`` decode steps, with their tensor values ("decode 详单#1/3");
- ``all``: + the execution events of every decode step.

``format_run_account`` is the short version a run ends with: one line per stretch of alike steps and the
decisions between them (what ``nanovllm-teach demo`` prints unless asked for ``--log``).
"""

from __future__ import annotations

import sys
from typing import IO, TYPE_CHECKING, Any, Iterable

import structlog

from nanovllm_teach.trace.events import PAYLOADS
from nanovllm_teach.trace.payload import Payload
from nanovllm_teach.i18n import resolve_lang
from nanovllm_teach.trace.reasons import explain
from nanovllm_teach.trace.schema import TENSOR_EVENTS, TraceEvent

if TYPE_CHECKING:
    from nanovllm_teach.trace.reader import Trace

VERBOSITIES = ("quiet", "normal", "detail", "all")


def shown_from(event: str) -> str:
    """The least verbosity that prints ``event``, as its payload type declares it (``Payload.shown_from``):
    "quiet" for the lifecycle, "detail" for execution; any other event, one unknown to this version too,
    from "normal"."""
    return PAYLOADS.get(event, Payload).shown_from


# Lists longer than this are cut in the console: a 4096-token input_ids would drown the step.
_MAX_LIST_ITEMS = 16

_DETAIL_LABEL = {
    "en": {"prefill": "prefill detail: ", "decode": "decode detail #{k}{of}: "},
    "zh": {"prefill": "prefill 详单：", "decode": "decode 详单#{k}{of}："},
}


def _format_value(value: Any, as_shape: bool = False) -> str:
    if as_shape and isinstance(value, list):
        # Shapes print as Python tuples, the way torch prints them: (2,) and (2, 1).
        return "(" + ", ".join(map(str, value)) + (",)" if len(value) == 1 else ")")
    if isinstance(value, list):
        items = [_format_value(v) for v in value[:_MAX_LIST_ITEMS]]
        if len(value) > _MAX_LIST_ITEMS:
            items.append(f"…(+{len(value) - _MAX_LIST_ITEMS})")
        return "[" + ", ".join(items) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_format_value(v)}" for k, v in value.items()) + "}"
    return str(value)  # str prints bare; bool/None/numbers as Python writes them


def _tensor_names(stats: dict[str, Any]) -> list[str]:
    """Names of the tensor-valued stats: the recorder stores each as ``<name>_shape`` (+ values)."""
    return [key[:-len("_shape")] for key in stats if key.endswith("_shape")]


def format_stats(stats: dict[str, Any], step: int | None = None, skip: frozenset[str] = frozenset()) -> str:
    """``{engine_step=1, scheduled=2, ...}``: the step first, then the stats in order."""
    parts = [f"engine_step={step}"] if step is not None else []
    parts += [f"{k}={_format_value(v, as_shape=k.endswith('_shape'))}" for k, v in stats.items() if k not in skip]
    return "{" + ", ".join(parts) + "}"


def format_event(event: TraceEvent, lang: str | None = None) -> str:
    """The TEACHING line of one event. Tensor values are left to the detail line; shapes stay."""
    stats = event.stats
    skip = frozenset(_tensor_names(stats))
    line = f"TEACHING/{event.event} | phase={event.phase} | reason={explain(event.reason, lang, event.event)}"
    if event.event == "STATE_TRANSITION" and "from" in stats and "to" in stats:
        line += f" | result={stats['from']} -> {stats['to']}"
        skip |= {"from", "to"}
    return line + f" | stats={format_stats(stats, event.step, skip)}"


def format_step_summary(event: TraceEvent) -> str:
    """The one-line step summary of a STEP_DONE event."""
    s = event.stats
    return (f"step#{event.step} {event.phase} done in {s['latency_ms']:.2f}ms "
            f"num_tokens_stat={s['num_tokens_stat']} finished_this_step={_format_value(s['finished'])}")


def format_tensor_detail(event: TraceEvent, lang: str | None = None, index: int | None = None,
                         total: int | None = None) -> str:
    """The detail line of a PREPARE_*_TENSORS event: tensor values where the trace kept them, else shapes.

    Decode lines are numbered ``decode 详单#1/3`` (``index`` of ``total``)."""
    stats = event.stats
    if event.event == "PREPARE_DECODE_TENSORS":
        of = f"/{total}" if total is not None and index is not None and index <= total else ""
        label = _DETAIL_LABEL[resolve_lang(lang)]["decode"].format(k=index if index is not None else "", of=of)
        parts = [f"bs={stats.get('batch_size')}"]
    else:
        label = _DETAIL_LABEL[resolve_lang(lang)]["prefill"]
        parts = [f"n_seqs={stats.get('n_seqs')}"]
    for name in _tensor_names(stats):
        if name in stats:
            parts.append(f"{name}={_format_value(stats[name])}")
        else:
            parts.append(f"{name}.shape={_format_value(stats[name + '_shape'], as_shape=True)}")
    return label + " ".join(parts)


class ConsoleRenderer:
    """A recorder sink that prints each TEACHING event as console lines.

    ``lang``: "en" or "zh". ``stream``: where lines go (default: ``sys.stdout`` at construction: the log is
    the lesson, not a side channel, and a notebook shows stderr on a warning-red background).
    ``verbosity``: one of ``VERBOSITIES``. ``decode_details``: how many decode steps "detail" shows in full.
    The renderer counts decode steps itself, so it must be given the events in order.
    """

    def __init__(self, lang: str | None = None, stream: IO[str] | None = None, verbosity: str = "normal",
                 decode_details: int = 3) -> None:
        if verbosity not in VERBOSITIES:
            raise ValueError(f"verbosity must be one of {VERBOSITIES}, got {verbosity!r}")
        self.lang = resolve_lang(lang)
        self.verbosity = verbosity
        self.decode_details = decode_details
        self._level = VERBOSITIES.index(verbosity)
        self._decode_steps = 0
        self._log = structlog.wrap_logger(
            structlog.PrintLogger(stream if stream is not None else sys.stdout),
            processors=[self._render], wrapper_class=structlog.BoundLogger, context_class=dict,
            cache_logger_on_first_use=True)

    def __call__(self, event: TraceEvent) -> None:
        self._log.info(event.event, record=event)

    def _render(self, logger: Any, method: str, event_dict: dict[str, Any]) -> str:
        """The pipeline's last processor: the lines of one event, or drop it if there are none."""
        lines = self.lines(event_dict["record"])
        if not lines:
            raise structlog.DropEvent
        return "\n".join(lines)

    def lines(self, event: TraceEvent) -> list[str]:
        """The console lines for ``event`` at this renderer's verbosity (often none)."""
        if event.event == "SCHEDULE_DECODE":
            self._decode_steps += 1
        level = shown_from(event.event)
        if level == "quiet":
            return [format_event(event, self.lang)]
        if level == "detail":
            return self._execution_lines(event)
        if self._level < VERBOSITIES.index("normal"):
            return []
        if event.event == "STEP_DONE":
            summary = format_step_summary(event)
            if self._level >= VERBOSITIES.index("detail"):
                return [format_event(event, self.lang), summary]
            return [summary]
        return [format_event(event, self.lang)]

    def _execution_lines(self, event: TraceEvent) -> list[str]:
        if self._level < VERBOSITIES.index("detail"):
            return []
        in_decode = event.phase == "decode"
        if in_decode and self.verbosity != "all" and self._decode_steps > self.decode_details:
            return []
        lines = [format_event(event, self.lang)]
        if event.event in TENSOR_EVENTS:
            lines.append(format_tensor_detail(event, self.lang, self._decode_steps if in_decode else None,
                                              self.decode_details))
        return lines


def render_trace(trace: "Trace | Iterable[TraceEvent]", lang: str | None = None, verbosity: str = "normal",
                 stream: IO[str] | None = None, decode_details: int = 3) -> None:
    """Print a loaded trace, or any run of its events in order (one step's, ``recorder.events[mark:]``),
    exactly as a live ``ConsoleRenderer`` printed the run."""
    renderer = ConsoleRenderer(lang, stream, verbosity, decode_details)
    for event in getattr(trace, "events", trace):
        renderer(event)


# ---- the account of a whole run: what the demo prints instead of the full stream --------------------------

def format_run_account(trace: "Trace", max_groups: int = 12) -> list[str]:
    """A short account of what the engine did in a run: one line per stretch of alike steps (a prefill
    step, or decode steps over the same batch), each followed by the decisions that ended it (admissions,
    preemptions, prefix-cache hits, finishes), and a last line on KV use. At most ``max_groups`` stretches
    are listed (the first and last ones); ``nanovllm-teach replay TRACE --text`` shows every step."""
    rows, settings = trace.steps, trace.settings
    if not rows:
        return ["the engine completed no step"]
    requests = {r.seq_id: r for r in trace.requests}
    groups: list[list[Any]] = []  # runs of alike steps
    for row in rows:
        last = groups[-1][-1] if groups else None
        alike = (last is not None and row.phase == last.phase == "decode" and row.seq_ids == last.seq_ids
                 and not (last.finished or last.preempted or row.preempted or row.prefix_hit_seq_ids))
        if alike:
            groups[-1].append(row)
        else:
            groups.append([row])
    tokens_out = sum(r.num_completion_tokens for r in trace.requests)
    seconds = (rows[-1].t_end_ns - rows[0].t_start_ns) / 1e9
    prefill = sum(r.phase == "prefill" for r in rows)
    lines = [f"What the engine did: {len(rows)} steps ({prefill} prefill, {len(rows) - prefill} decode), "
             f"{tokens_out} tokens out in {seconds:.2f} s",
             f"  KV cache: {settings.num_blocks} blocks of {settings.block_size} tokens; {settings.policy} "
             f"batching; prefix caching {'on' if settings.enable_prefix_caching else 'off'}"]
    chunked_before: set[int] = set()  # sequences whose prompt was chunked in a step listed already
    shown = groups if len(groups) <= max_groups else groups[:max_groups // 2] + [None] + groups[-(max_groups // 2):]
    for group in shown:
        if group is None:
            hidden = len(groups) - 2 * (max_groups // 2)
            lines.append(f"  ... {hidden} more stretches of steps (nanovllm-teach replay TRACE --text lists them)")
            continue
        lines += _group_lines(group, requests, chunked_before)
        chunked_before.update(sid for row in group for sid in row.chunked)
    peak = max(rows, key=lambda r: r.held_blocks)
    lines.append(f"  KV use: peak {peak.held_blocks} of {settings.num_blocks} blocks at step {peak.step}; "
                 f"{rows[-1].used_blocks} held after the last step")
    return lines


def _ids_text(ids: list[int]) -> str:
    return ("seq " if len(ids) == 1 else "seqs ") + ", ".join(map(str, ids))


def _group_lines(group: list[Any], requests: dict[int, Any], chunked_before: set[int]) -> list[str]:
    """The line of a stretch of alike steps, and the decisions made in it."""
    first, last = group[0], group[-1]
    where = f"step {first.step}" if len(group) == 1 else f"steps {first.step}-{last.step}"
    mean_ms = sum(r.latency_ms for r in group) / len(group)
    if first.phase == "prefill":
        what = f"{first.num_batched_tokens or 0} prompt tokens"
    else:
        what = f"{first.batch_size} token{'s' if first.batch_size > 1 else ''} per step"
    low, high = min(r.held_blocks for r in group), max(r.held_blocks for r in group)
    kv = f"{low}" if low == high else f"{low}-{high}"
    lines = [f"  {where:<12} {first.phase:<7} batch {first.batch_size:<3} {what:<20} "
             f"KV {kv} block{'s' if high != 1 else ''} held  {mean_ms:.1f} ms/step"]
    notes = []
    for row in group:
        if row.preempted:
            notes.append(f"preempted {_ids_text(row.preempted)} at step {row.step}: no free block for the "
                         "decode; they wait to be prefilled again")
        if row.phase == "prefill":
            admitted = [sid for sid in row.seq_ids
                        if sid in requests and requests[sid].first_scheduled_step == row.step]
            again = [sid for sid in row.seq_ids if sid not in admitted and sid not in row.chunked]
            if admitted:
                notes.append(f"admitted {_ids_text(admitted)}"
                             + (f" ({row.num_cached_tokens} prompt tokens from the prefix cache)"
                                if row.num_cached_tokens else ""))
            ends = [sid for sid in again if sid in chunked_before or any(sid in r.chunked for r in group)]
            if ends:
                notes.append(f"{_ids_text(ends)}: the last chunk of the prompt")
            if len(ends) < len(again):
                notes.append(f"prefilled {_ids_text([sid for sid in again if sid not in ends])} again "
                             "(preempted before, so the K/V is computed anew)")
            if row.chunked:
                notes.append(f"{_ids_text(row.chunked)}: only a chunk of the prompt (chunked prefill), "
                             "more next step")
        if row.finished:
            reasons = sorted({requests[sid].finish_reason for sid in row.finished if sid in requests})
            shrink = (f"; the batch shrinks to {row.running_len}" if row.running_len else "; nothing left to run")
            notes.append(f"{_ids_text(row.finished)} finished at step {row.step} ({', '.join(map(str, reasons))})"
                         f" and freed {'its' if len(row.finished) == 1 else 'their'} blocks{shrink}")
    return lines + [f"{'':15}-> {note}" for note in notes]
