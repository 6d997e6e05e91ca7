"""Two traces of the same workload side by side: static vs continuous batching, prefix cache on vs off,
a large vs a small KV budget.

``compare(a, b)`` draws both on shared axes (batch size, KV blocks, queues, request Gantt chart; same
step axis, same y scales) and sums each up (``TraceSummary``). Every number comes from the traces alone.

The two wastes of static batching, "early-finished" and
"late-joining", are counted in *slot-steps* (one request slot kept from useful work for one engine step);
``early_finished_waste`` and ``late_joining_waste`` define them exactly.

The summary's words, printed (``format_summaries``) and drawn (``compare``), are in the chosen language
(``viz/words.py``); the numbers are the same in both. No torch. Emits no events.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from math import ceil
from statistics import mean

from matplotlib.figure import Figure
from matplotlib.table import Table

from nanovllm_teach.i18n import resolve_lang, say, speaking
from nanovllm_teach.trace.console import pad, text_width
from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.trace.segments import held_segments, request_segments
from nanovllm_teach.viz.gantt import draw_gantt
from nanovllm_teach.viz.messages import IN_MEMORY, NO_STEP_TO_SUMMARIZE
from nanovllm_teach.viz.render import NotebookFigure, as_written
from nanovllm_teach.viz.timeline import draw_batch_size, draw_kv_blocks, draw_queues, mark_preemptions, phase_legend
from nanovllm_teach.viz.words import COMPARE_TITLE, POLICY_NAME, SUMMARY_ROW


@dataclass(frozen=True, slots=True)
class TraceSummary:
    """The numbers that compare two runs of one workload."""

    label: str
    policy: str
    num_requests: int
    steps: int
    prefill_steps: int
    decode_steps: int
    output_tokens: int  # completion tokens of every request
    tokens_per_step: float  # output_tokens / steps
    wall_s: float  # first step's start to last step's end
    tokens_per_s: float  # output_tokens / wall_s
    mean_ttft_ms: float | None  # arrival -> first token, mean over requests that got one
    mean_ttft_steps: float | None  # steps from arrival to the step that produced the first token, inclusive
    early_finished_waste: int  # slot-steps, see the module docstring
    late_joining_waste: int  # slot-steps, see the module docstring


def trace_label(trace: Trace) -> str:
    """A short name for a trace: its scenario, else its file name."""
    return str(trace.header.get("scenario") or (trace.path.stem if trace.path else "trace"))


def early_finished_waste(trace: Trace) -> int:
    """Slot-steps held by finished requests while their static batch still runs.

    Under static batching a batch runs until its last member finishes and nobody joins meanwhile. A
    batch (``segments.static_batches``: from a step that began with nothing running to the step after
    which nothing runs) whose last step is ``E`` and a member that finished at step ``f < E`` hold that
    member's slot idle for the ``E - f`` steps ``f+1 .. E``; the waste is the sum over every member of
    every batch (the ``held`` segments the Gantt chart draws dotted). Under continuous batching a
    finished request leaves ``running`` in the step it finishes and its slot is free at the next
    schedule, so the waste is 0 by definition. The policy is the one the trace recorded (ENGINE_INIT
    ``policy``, else the header's ``scheduling_policy``).
    """
    return sum(seg.step_end - seg.step_start for seg in held_segments(trace))


def late_joining_waste(trace: Trace) -> int:
    """(request, step) pairs where a waiting request could have joined the step but did not.

    A pair counts when the request was waiting during the step (arrived, or preempted, and not
    admitted: the ``waiting`` and ``preempted`` segments of ``segments.request_segments``) and all three
    held: at the start of the step (after the previous step) fewer than ``max_num_seqs`` requests were
    running; the free KV blocks were at least the blocks its tokens need (``ceil((prompt + completion
    tokens so far) / block_size)``, prefix-cache hits ignored); the step computed fewer tokens than
    ``max_num_batched_tokens`` (its budget had room). Static batching accumulates it while a batch
    drains; continuous batching only when the head of the queue blocks the requests behind it.
    """
    settings = trace.settings
    block_size = settings.block_size
    max_seqs = settings.max_num_seqs or float("inf")
    max_tokens = settings.max_num_batched_tokens or float("inf")
    rows = {row.step: row for row in trace.steps}
    steps = sorted(rows)
    previous = {step: rows[prev] for prev, step in zip(steps, steps[1:])}
    prompt_len = {r.seq_id: r.prompt_len for r in trace.requests}
    waste = 0
    produced: dict[int, int] = {}  # completion tokens each request had before the segment being read
    for seg in request_segments(trace):  # in (seq_id, step) order
        sid = seg.seq_id
        if seg.state in ("waiting", "preempted"):
            need = ceil((prompt_len.get(sid, 0) + produced.get(sid, 0)) / block_size)
            for step in range(seg.step_start, seg.step_end):
                prev = previous.get(step)
                running, free = (prev.running_len, prev.free_blocks) if prev else (0, settings.num_blocks)
                batched = rows[step].num_batched_tokens or 0
                if running < max_seqs and free >= need and batched < max_tokens:
                    waste += 1
        elif seg.state == "decode" or (seg.state == "prefill" and not seg.partial):
            produced[sid] = produced.get(sid, 0) + (seg.step_end - seg.step_start)
    return waste


def summarize(trace: Trace, label: str | None = None) -> TraceSummary:
    """The ``TraceSummary`` of one trace."""
    rows, requests = trace.steps, trace.requests
    if not rows:
        raise ValueError(say(NO_STEP_TO_SUMMARIZE, path=trace.path or say(IN_MEMORY)))
    output_tokens = sum(r.num_completion_tokens for r in requests)
    wall_s = (rows[-1].t_end_ns - rows[0].t_start_ns) / 1e9
    ttft_ms = [r.ttft_ms for r in requests if r.ttft_ms is not None]
    ttft_steps = [r.first_token_step - r.enqueue_step + 1 for r in requests if r.first_token_step is not None]
    return TraceSummary(
        label=label or trace_label(trace), policy=trace.settings.policy,
        num_requests=len(requests), steps=len(rows), prefill_steps=sum(r.phase == "prefill" for r in rows),
        decode_steps=sum(r.phase == "decode" for r in rows), output_tokens=output_tokens,
        tokens_per_step=output_tokens / len(rows), wall_s=wall_s,
        tokens_per_s=output_tokens / wall_s if wall_s > 0 else 0.0,
        mean_ttft_ms=mean(ttft_ms) if ttft_ms else None, mean_ttft_steps=mean(ttft_steps) if ttft_steps else None,
        early_finished_waste=early_finished_waste(trace), late_joining_waste=late_joining_waste(trace))


# The summary's rows: the ``TraceSummary`` field each shows, and how its number is written.
_ROWS = [("policy", "{}"), ("num_requests", "{}"), ("steps", "{}"), ("prefill_decode", ""),
         ("output_tokens", "{}"), ("tokens_per_step", "{:.2f}"), ("wall_s", "{:.3f}"), ("tokens_per_s", "{:.1f}"),
         ("mean_ttft_ms", "{:.1f}"), ("mean_ttft_steps", "{:.1f}"), ("early_finished_waste", "{}"),
         ("late_joining_waste", "{}")]


def policy_name(policy: str, lang: str | None = None) -> str:
    """A scheduling policy as the learner reads it (an unknown one by its own name)."""
    return say(POLICY_NAME.get(policy, policy), lang)


def summary_rows(summaries: list[TraceSummary], lang: str | None = None) -> list[list[str]]:
    """The summaries as rows of cells: a header row of labels, then one row per measure, in ``lang``."""
    table = [["", *(s.label for s in summaries)]]
    for key, fmt in _ROWS:
        cells = []
        for s in summaries:
            if key == "prefill_decode":
                cells.append(f"{s.prefill_steps} / {s.decode_steps}")
            elif key == "policy":
                cells.append(policy_name(s.policy, lang))
            else:
                value = asdict(s)[key]
                cells.append("-" if value is None else fmt.format(value))
        table.append([say(SUMMARY_ROW[key], lang), *cells])
    return table


def format_summaries(summaries: list[TraceSummary], lang: str | None = None) -> str:
    """The summaries as a fixed-width table, one column per trace, in ``lang`` (None: the chosen language);
    Chinese characters count two columns, as a terminal draws them."""
    table = summary_rows(summaries, lang)
    widths = [max(text_width(line[c]) for line in table) for c in range(len(table[0]))]
    return "\n".join("  ".join(pad(cell, w, right=c > 0)
                               for c, (cell, w) in enumerate(zip(line, widths))).rstrip() for line in table)


@dataclass
class Comparison:
    """The side-by-side figure and the two summaries."""

    figure: Figure
    a: TraceSummary
    b: TraceSummary

    lang: str = "en"  # the language it was drawn in, which ``table`` prints in too

    def table(self) -> str:
        return format_summaries([self.a, self.b], self.lang)


def compare(trace_a: Trace, trace_b: Trace, labels: tuple[str, str] | None = None,
            lang: str | None = None) -> Comparison:
    """Draw ``trace_a`` (left) and ``trace_b`` (right) on shared axes and sum both up; the words in
    ``lang`` (None: the chosen language)."""
    lang = resolve_lang(lang)
    with speaking(lang):  # the panels' own words (viz/words.py) follow the chosen language
        return _compare(trace_a, trace_b, labels, lang)


@as_written
def _compare(trace_a: Trace, trace_b: Trace, labels: tuple[str, str] | None, lang: str) -> Comparison:
    traces = (trace_a, trace_b)
    summaries = [summarize(t, labels[i] if labels else None) for i, t in enumerate(traces)]
    num_requests = max(len(t.requests) for t in traces)
    fig = NotebookFigure(figsize=(15, 9.5 + 0.2 * min(num_requests, 40)), layout="constrained")
    mosaic = [[f"{panel}{i}" for i in range(2)] for panel in ("bs", "kv", "queues", "gantt")] + [["table"] * 2]
    axes = fig.subplot_mosaic(mosaic, height_ratios=[1, 1, 1, 0.8 + 0.1 * min(num_requests, 40), 1.1])
    # Shared axes, set before drawing so that autoscaling sees both traces: one step axis for every
    # panel, one y scale per row of panels.
    for name in ("bs0", "bs1", "kv0", "kv1", "queues0", "queues1", "gantt1"):
        axes[name].sharex(axes["gantt0"])
    for panel in ("bs", "kv", "queues", "gantt"):
        axes[f"{panel}1"].sharey(axes[f"{panel}0"])
    for i, (trace, summary) in enumerate(zip(traces, summaries)):
        rows = trace.steps
        for panel, draw in (("bs", draw_batch_size), ("kv", draw_kv_blocks), ("queues", draw_queues)):
            draw(axes[f"{panel}{i}"], rows)
            mark_preemptions(axes[f"{panel}{i}"], rows)
        phase_legend(axes[f"bs{i}"], rows)
        draw_gantt(axes[f"gantt{i}"], trace, legend=i == 1)
        axes[f"bs{i}"].set_title(say(COMPARE_TITLE, lang, label=summary.label, policy=policy_name(summary.policy, lang),
                                     steps=summary.steps, tokens_per_step=summary.tokens_per_step), fontsize=10)
    # The panels set their own limits from their own trace; the shared ones must fit both.
    axes["gantt0"].set_xlim(min(t.steps[0].step for t in traces) - 0.5, max(t.steps[-1].step for t in traces) + 1.0)
    axes["kv0"].set_ylim(0, 1.25 * max(r.held_blocks for t in traces for r in t.steps) + 1)
    axes["gantt0"].set_ylim(num_requests - 0.5, -0.5)
    axes["table"].axis("off")
    # A table of cells rather than monospace text: a Chinese character is not two Latin columns wide in
    # any font the picture can count on, so only cells keep the numbers lined up.
    rows = summary_rows(summaries, lang)
    table = Table(axes["table"], loc="upper left")
    height = 1 / len(rows)
    for r, line in enumerate(rows):
        for c, cell in enumerate(line):
            table.add_cell(r, c, width=0.34 if c == 0 else 0.14, height=height, text=cell,
                           loc="left" if c == 0 else "right", edgecolor="none")
    table.auto_set_font_size(False)
    table.set_fontsize(9)
    table.set_gid("summary")
    axes["table"].add_table(table)
    return Comparison(fig, *summaries, lang)
