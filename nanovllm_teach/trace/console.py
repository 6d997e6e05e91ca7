"""The console view of TEACHING events, in the shape of nano-vllm's teaching log:

    TEACHING/SCHEDULE_PREFILL | phase=prefill | reason=waiting 队列有可准入请求 | stats={engine_step=1, scheduled=2, ...}
    step#1 prefill done in 772.24ms num_tokens_stat=30 finished_this_step=[]   (中文："step#1 prefill 完成，用时 772.24ms …")
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
decisions between them (what ``nanovllm-teach demo`` prints unless asked for ``--log``), in English or
Chinese from the ``Text`` constants above it, its columns padded to terminal width (``pad``: a Chinese
character takes two columns).
"""

from __future__ import annotations

import sys
import statistics
from typing import IO, TYPE_CHECKING, Any, Iterable

import structlog
import wcwidth

from nanovllm_teach.trace.events import PAYLOADS
from nanovllm_teach.trace.payload import Payload, printable
from nanovllm_teach.i18n import Text, resolve_lang, say
from nanovllm_teach.trace.reasons import explain
from nanovllm_teach.trace.schema import TENSOR_EVENTS, TraceEvent

if TYPE_CHECKING:
    from nanovllm_teach.trace.reader import Trace

VERBOSITIES = ("quiet", "normal", "detail", "all")
BAD_VERBOSITY = Text(en="verbosity must be one of {choices}, got {verbosity!r}",
                     zh="verbosity 必须是 {choices} 之一，收到的是 {verbosity!r}")


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


STEP_SUMMARY = Text(en="step#{step} {phase} done in {ms:.2f}ms num_tokens_stat={stat} finished_this_step={finished}",
                   zh="step#{step} {phase} 完成，用时 {ms:.2f}ms num_tokens_stat={stat} finished_this_step={finished}")


def format_step_summary(event: TraceEvent, lang: str | None = None) -> str:
    """The one-line step summary of a STEP_DONE event: nano-vllm's, its words in ``lang``, its fields as they are."""
    s = event.stats
    return say(STEP_SUMMARY, lang, step=event.step, phase=event.phase, ms=s["latency_ms"],
               stat=s["num_tokens_stat"], finished=_format_value(s["finished"]))


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
            raise ValueError(say(BAD_VERBOSITY, choices=VERBOSITIES, verbosity=verbosity))
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
        """The console lines for ``event`` at this renderer's verbosity (often none), with any control
        character a trace's strings carry written as its escape."""
        return [printable(line) for line in self._lines(event)]

    def _lines(self, event: TraceEvent) -> list[str]:
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
            summary = format_step_summary(event, self.lang)
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

NO_STEP = Text(en="the engine completed no step", zh="引擎一步也没有完成")
ACCOUNT_HEAD = Text(en="What the engine did: {steps} steps ({prefill} prefill, {decode} decode), {tokens} tokens out "
                       "in {seconds:.2f} s",
                    zh="引擎做了什么：共 {steps} 步（{prefill} 步预填充，{decode} 步解码），{seconds:.2f} 秒内输出 {tokens} 个 token")
ACCOUNT_KV = Text(en="  KV cache: {blocks} blocks of {block_size} tokens; {policy}; {prefix}",
                  zh="  KV 缓存：{blocks} 个块，每块 {block_size} 个 token；{policy}；{prefix}")
POLICY = {"continuous": Text(en="continuous batching", zh="连续批处理"),
          "static": Text(en="static batching", zh="静态批处理")}
PREFIX_CACHING = {True: Text(en="prefix caching on", zh="前缀缓存开启"),
                  False: Text(en="prefix caching off", zh="前缀缓存关闭")}
HIDDEN_STRETCHES = Text(en="  ... {hidden} more stretches of steps (nanovllm-teach replay TRACE --text lists them)",
                        zh="  …… 还有 {hidden} 段（nanovllm-teach replay TRACE --text 会逐步列出）")
KV_USE = Text(en="  KV use: peak {peak} of {blocks} blocks at step {step}; {held} held after the last step",
              zh="  KV 使用：第 {step} 步达到峰值，占用 {peak} 块（共 {blocks} 块）；最后一步之后仍占用 {held} 块")
ONE_STEP = Text(en="step {first}", zh="第 {first} 步")
STEPS = Text(en="steps {first}-{last}", zh="第 {first}-{last} 步")
PROMPT_TOKENS = Text(en="{n} prompt tokens", zh="{n} 个 prompt token")
TOKENS_PER_STEP = {1: Text(en="1 token per step", zh="每步 1 个 token"),
                   2: Text(en="{n} tokens per step", zh="每步 {n} 个 token")}
STRETCH = Text(en="batch {batch} {what} KV {kv} {blocks} held  {time}",
               zh="batch {batch} {what} 占用 KV {kv} {blocks}  {time}")
MEDIAN_STEP = Text(en="median {ms:.1f} ms/step{spikes}", zh="中位数 {ms:.1f} ms/步{spikes}")
# A step over SPIKE_FACTOR times its stretch's median is the machine pausing the engine (another process on
# the cores, the allocator, the garbage collector), not the work of that batch: told apart, so that a few
# 20 ms pauses do not pass for the cost of 0.3 ms steps, as they would in a mean.
SPIKE_FACTOR = 3
SPIKES = {1: Text(en=", 1 spike of {high:.1f} ms", zh="，1 个尖峰步 {high:.1f} ms"),
          2: Text(en=", {n} spikes up to {high:.1f} ms", zh="，{n} 个尖峰步，最高 {high:.1f} ms")}
BLOCKS = {1: Text(en="block", zh="块"), 2: Text(en="blocks", zh="块")}
SEQS = {1: Text(en="seq {ids}", zh="序列 {ids}"), 2: Text(en="seqs {ids}", zh="序列 {ids}")}
LIST_SEPARATOR = Text(en=", ", zh="、")
PHASE_NAME = {"prefill": Text(en="prefill", zh="预填充"), "decode": Text(en="decode", zh="解码")}
PREEMPTED_AT = Text(en="preempted {seqs} at step {step}: no free block for the decode; they wait to be prefilled again",
                    zh="第 {step} 步抢占了{seqs}：解码没有空闲块可用；它们回到队列，等待重新预填充")
ADMITTED = Text(en="admitted {seqs}", zh="准入{seqs}")
FROM_PREFIX_CACHE = Text(en=" ({n} prompt tokens from the prefix cache)", zh="（其中 {n} 个 prompt token 来自前缀缓存）")
LAST_CHUNK = Text(en="{seqs}: the last chunk of the prompt", zh="{seqs}：prompt 的最后一块")
PREFILLED_AGAIN = Text(en="prefilled {seqs} again (preempted before, so the K/V is computed anew)",
                       zh="再次预填充{seqs}（之前被抢占，K/V 要重新计算）")
CHUNK_ONLY = Text(en="{seqs}: only a chunk of the prompt (chunked prefill), more next step",
                  zh="{seqs}：只算了 prompt 的一块（分块预填充），下一步继续")
FINISHED_AT = {1: Text(en="{seqs} finished at step {step} ({reasons}) and freed its blocks{then}",
                       zh="{seqs} 在第 {step} 步结束（{reasons}），释放了它的块{then}"),
               2: Text(en="{seqs} finished at step {step} ({reasons}) and freed their blocks{then}",
                       zh="{seqs} 在第 {step} 步结束（{reasons}），释放了它们的块{then}")}
SHRINKS_TO = Text(en="; the batch shrinks to {n}", zh="；batch 缩小到 {n}")
NOTHING_LEFT = Text(en="; nothing left to run", zh="；已没有序列在运行")


def text_width(text: str) -> int:
    """Columns ``text`` takes in a terminal: a wide (CJK) character takes two."""
    return wcwidth.width(text)


def pad(text: str, width: int, right: bool = False) -> str:
    """``text`` padded with spaces to ``width`` terminal columns (``right``: aligned right)."""
    fill = " " * max(0, width - text_width(text))
    return fill + text if right else text + fill


def format_run_account(trace: "Trace", max_groups: int = 12, lang: str | None = None) -> list[str]:
    """A short account of what the engine did in a run, in ``lang`` (None: the chosen language): one line
    per stretch of alike steps (a prefill step, or decode steps over the same batch; its median step time,
    and apart from it the spikes, steps over ``SPIKE_FACTOR`` times that median), each followed by the
    decisions that ended it (admissions, preemptions, prefix-cache hits, finishes), and a last line on KV
    use. At most ``max_groups`` stretches are listed (the first and last ones); ``nanovllm-teach replay
    TRACE --text`` shows every step."""
    lang = resolve_lang(lang)
    rows, settings = trace.steps, trace.settings
    if not rows:
        return [say(NO_STEP, lang)]
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
    policy = POLICY.get(settings.policy, settings.policy)
    lines = [say(ACCOUNT_HEAD, lang, steps=len(rows), prefill=prefill, decode=len(rows) - prefill, tokens=tokens_out,
                 seconds=seconds),
             say(ACCOUNT_KV, lang, blocks=settings.num_blocks, block_size=settings.block_size,
                 policy=say(policy, lang), prefix=say(PREFIX_CACHING[bool(settings.enable_prefix_caching)], lang))]
    chunked_before: set[int] = set()  # sequences whose prompt was chunked in a step listed already
    shown = groups if len(groups) <= max_groups else groups[:max_groups // 2] + [None] + groups[-(max_groups // 2):]
    for group in shown:
        if group is None:
            lines.append(say(HIDDEN_STRETCHES, lang, hidden=len(groups) - 2 * (max_groups // 2)))
            continue
        lines += _group_lines(group, requests, chunked_before, lang)
        chunked_before.update(sid for row in group for sid in row.chunked)
    peak = max(rows, key=lambda r: r.held_blocks)
    lines.append(say(KV_USE, lang, peak=peak.held_blocks, blocks=settings.num_blocks, step=peak.step,
                     held=rows[-1].used_blocks))
    return lines


def _ids_text(ids: list[int], lang: str) -> str:
    return say(SEQS[min(len(ids), 2)], lang, ids=say(LIST_SEPARATOR, lang).join(map(str, ids)))


def _group_lines(group: list[Any], requests: dict[int, Any], chunked_before: set[int], lang: str) -> list[str]:
    """The line of a stretch of alike steps, and the decisions made in it."""
    first, last = group[0], group[-1]
    where = say(ONE_STEP if len(group) == 1 else STEPS, lang, first=first.step, last=last.step)
    median_ms = statistics.median(r.latency_ms for r in group)
    spikes = [r.latency_ms for r in group if r.latency_ms > SPIKE_FACTOR * median_ms]
    time = (f"{median_ms:.1f} ms" if len(group) == 1 else
            say(MEDIAN_STEP, lang, ms=median_ms,
                spikes=say(SPIKES[min(len(spikes), 2)], lang, n=len(spikes), high=max(spikes)) if spikes else ""))
    if first.phase == "prefill":
        what = say(PROMPT_TOKENS, lang, n=first.num_batched_tokens or 0)
    else:
        what = say(TOKENS_PER_STEP[min(first.batch_size, 2)], lang, n=first.batch_size)
    low, high = min(r.held_blocks for r in group), max(r.held_blocks for r in group)
    kv = f"{low}" if low == high else f"{low}-{high}"
    phase = say(PHASE_NAME.get(first.phase, first.phase), lang)
    # Padded to terminal columns, so that the English and the Chinese line up alike.
    stretch = say(STRETCH, lang, batch=pad(str(first.batch_size), 3), what=pad(what, 20), kv=kv,
                  blocks=say(BLOCKS[1 if high == 1 else 2], lang), time=time)
    lines = [f"  {pad(where, 12)} {pad(phase, 7)} {stretch}"]
    notes = []
    for row in group:
        if row.preempted:
            notes.append(say(PREEMPTED_AT, lang, seqs=_ids_text(row.preempted, lang), step=row.step))
        if row.phase == "prefill":
            admitted = [sid for sid in row.seq_ids
                        if sid in requests and requests[sid].first_scheduled_step == row.step]
            again = [sid for sid in row.seq_ids if sid not in admitted and sid not in row.chunked]
            if admitted:
                notes.append(say(ADMITTED, lang, seqs=_ids_text(admitted, lang))
                             + (say(FROM_PREFIX_CACHE, lang, n=row.num_cached_tokens) if row.num_cached_tokens else ""))
            ends = [sid for sid in again if sid in chunked_before or any(sid in r.chunked for r in group)]
            if ends:
                notes.append(say(LAST_CHUNK, lang, seqs=_ids_text(ends, lang)))
            if len(ends) < len(again):
                anew = [sid for sid in again if sid not in ends]
                notes.append(say(PREFILLED_AGAIN, lang, seqs=_ids_text(anew, lang)))
            if row.chunked:
                notes.append(say(CHUNK_ONLY, lang, seqs=_ids_text(row.chunked, lang)))
        if row.finished:
            reasons = sorted({requests[sid].finish_reason for sid in row.finished if sid in requests})
            then = say(SHRINKS_TO, lang, n=row.running_len) if row.running_len else say(NOTHING_LEFT, lang)
            notes.append(say(FINISHED_AT[min(len(row.finished), 2)], lang, seqs=_ids_text(row.finished, lang),
                             step=row.step, reasons=say(LIST_SEPARATOR, lang).join(map(str, reasons)), then=then))
    return lines + [f"{'':15}-> {note}" for note in notes]
