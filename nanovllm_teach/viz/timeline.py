"""Timelines over engine steps, drawn from a trace's step table alone.

One panel per quantity a learner watches: batch size, KV blocks used out of the total, step latency,
tokens computed per step, and the waiting/running queue lengths. Prefill steps and decode steps get
different colours everywhere, preemptions are marked, and an optional cursor shows the current step.

The step convention, the same in every picture (and stated in the legend, ``words.STEP_CONVENTION``): step ``s``
is the column x = ``s - 0.5 .. s + 0.5`` and shows the step as it ran: its batch, its tokens, the KV
blocks it held and the queues it ran with (``StepRow.held_blocks``, ``waiting_in_step``,
``running_in_step``). What a step frees when its requests finish shows from its right edge on, where the
Gantt chart puts the finish marker and where the batch bars drop. The panel functions (``draw_batch_size`` ...) are reused by the side-by-side comparison;
cursor lines carry ``gid="cursor"`` so ``move_cursor`` (and the player) can find them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure, SubFigure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from nanovllm_teach.i18n import say
from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.trace.tables import StepRow
from nanovllm_teach.viz import words
from nanovllm_teach.viz.messages import IN_MEMORY, NO_STEP_TO_DRAW
from nanovllm_teach.viz.render import NotebookFigure
from nanovllm_teach.viz.render import as_written
from nanovllm_teach.viz.style import BOUND_COLORS, CURSOR_COLOR, PHASE_COLORS, PREEMPT_COLOR


def _bars(ax: Axes, rows: list[StepRow], values: list[float], gid: str, bottom: float = 0.0,
          colors: list[str] | None = None) -> None:
    """One bar per step, coloured by phase unless ``colors`` says otherwise: a single ``PolyCollection`` (one
    path per step, in step order), which draws a thousand-step trace far faster than a thousand patches."""
    steps = np.array([r.step for r in rows], dtype=float)
    tops = np.array(values, dtype=float)
    x0, x1 = steps - 0.5, steps + 0.5
    bottoms = np.full_like(tops, bottom)
    corners = [(x0, bottoms), (x1, bottoms), (x1, tops), (x0, tops)]  # counter-clockwise from bottom left
    verts = np.stack([np.column_stack(corner) for corner in corners], axis=1)
    # autolim=False: matplotlib would transform every path to find limits that the corners below give.
    facecolors = colors or [PHASE_COLORS[r.phase] for r in rows]
    ax.add_collection(PolyCollection(verts, facecolors=facecolors, linewidths=0, gid=gid), autolim=False)
    ax.update_datalim([(x0[0], bottom), (x1[-1], max(tops.max(), bottom))])
    ax.autoscale_view()


def _columns(rows: list[StepRow], values: list[float]) -> tuple[list[float], list[float]]:
    """A step line over the steps' columns: each value from its step's left edge to the next one's, the last
    one to the right edge of the last step (``where="post"``)."""
    return [r.step - 0.5 for r in rows] + [rows[-1].step + 0.5], list(values) + [values[-1]]


def draw_batch_size(ax: Axes, rows: list[StepRow]) -> None:
    _bars(ax, rows, [r.batch_size for r in rows], "batch-size")
    ax.set_ylabel(say(words.BATCH_SIZE), fontsize=8)


def draw_kv_blocks(ax: Axes, rows: list[StepRow]) -> None:
    total_blocks = rows[0].used_blocks + rows[0].free_blocks
    xs, held = _columns(rows, [r.held_blocks for r in rows])
    ax.fill_between(xs, held, step="post", color="#666666", alpha=0.6, gid="kv-used")
    peak_used = max(r.held_blocks for r in rows)
    # Scale to what is used; the cache's capacity is drawn only when it is on a comparable scale.
    ax.set_ylim(0, min(total_blocks, peak_used * 1.25 + 1) * 1.05)
    if total_blocks <= peak_used * 1.25 + 1:
        ax.axhline(total_blocks, color="black", linewidth=0.8, linestyle="--", gid="kv-capacity")
    ax.set_ylabel(say(words.KV_BLOCKS_HELD_OF, total=total_blocks), fontsize=8)


def draw_latency(ax: Axes, rows: list[StepRow]) -> None:
    """Step latency; a simulated run's bars are coloured by what bounded each predicted step instead."""
    latencies = [r.latency_ms for r in rows]
    bounds = [r.bound for r in rows]
    colors = [BOUND_COLORS.get(b, PHASE_COLORS[r.phase]) for b, r in zip(bounds, rows)] if any(bounds) else None
    lowest = max(min(latencies), 1e-3)
    if max(latencies) > 20 * lowest:
        # A log scale has no zero: the bars start a little below the fastest step.
        ax.set_yscale("log")
        _bars(ax, rows, latencies, "latency", bottom=lowest / 2, colors=colors)
    else:
        _bars(ax, rows, latencies, "latency", colors=colors)
    ax.set_ylabel(say(words.STEP_LATENCY), fontsize=8)
    if colors:
        handles = [Patch(color=BOUND_COLORS[b], label=say(words.BOUND[b])) for b in BOUND_COLORS if b in bounds]
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8.5, frameon=False,
                  title=say(words.PREDICTED_STEP), title_fontsize=7, alignment="left")


def draw_tokens(ax: Axes, rows: list[StepRow]) -> None:
    _bars(ax, rows, [r.num_batched_tokens or 0 for r in rows], "tokens")
    ax.set_ylabel(say(words.TOKENS_COMPUTED), fontsize=8)


def draw_queues(ax: Axes, rows: list[StepRow]) -> None:
    xs, waiting = _columns(rows, [r.waiting_in_step for r in rows])
    _, running = _columns(rows, [r.running_in_step for r in rows])
    ax.step(xs, waiting, where="post", label=say(words.QUEUE["waiting"]), color="#e7298a", gid="waiting")
    ax.step(xs, running, where="post", label=say(words.QUEUE["running"]), color="#1f78b4", gid="running")
    ax.set_ylabel(say(words.QUEUE_LENGTH), fontsize=8)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8.5, frameon=False)


def mark_preemptions(ax: Axes, rows: list[StepRow]) -> None:
    for row in rows:
        if row.preempted:
            ax.axvline(row.step, color=PREEMPT_COLOR, linewidth=0.8, alpha=0.7, gid="preempt")


def phase_legend(ax: Axes, rows: list[StepRow]) -> None:
    handles = [Patch(color=c, label=say(words.PHASE[p])) for p, c in PHASE_COLORS.items()]
    if any(r.preempted for r in rows):
        handles.append(Line2D([], [], color=PREEMPT_COLOR, label=say(words.PREEMPTION)))
    # Beside the panel, as the Gantt chart's legend: nothing drawn is hidden, and every panel of a figure
    # keeps the same width (one x axis).
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8.5, frameon=False,
              title=say(words.STEP_CONVENTION), title_fontsize=7, alignment="left")


PANELS = (draw_batch_size, draw_kv_blocks, draw_latency, draw_tokens, draw_queues)


def draw_timelines(axes: list[Axes], trace: Trace, cursor_step: int | None = None) -> None:
    """Draw the five panels of ``trace`` into ``axes`` (five Axes sharing their x axis, top to bottom)."""
    rows = trace.steps
    for draw, ax in zip(PANELS, axes):
        draw(ax, rows)
        if draw is not draw_latency:  # counts: no "1.5 sequences", and few ticks on a short panel
            ax.yaxis.set_major_locator(MaxNLocator(nbins=4, integer=True))
        mark_preemptions(ax, rows)
        if cursor_step is not None:
            ax.axvline(cursor_step, color=CURSOR_COLOR, linewidth=1.2, gid="cursor")
    axes[-1].set_xlabel(say(words.ENGINE_STEP))
    axes[-1].set_xlim(rows[0].step - 0.5, rows[-1].step + 0.5)
    phase_legend(axes[0], rows)


@as_written
def plot_timelines(trace: Trace, cursor_step: int | None = None,
                   figure: Figure | SubFigure | None = None) -> Figure | SubFigure:
    """Draw the five timelines of ``trace`` (into ``figure`` if given, e.g. a widget's figure or a subfigure)."""
    rows = trace.steps
    if not rows:
        raise ValueError(say(NO_STEP_TO_DRAW, path=trace.path or say(IN_MEMORY)))
    fig = figure if figure is not None else NotebookFigure(figsize=(11, 9), layout="constrained")
    fig.clear()
    draw_timelines(list(fig.subplots(len(PANELS), 1, sharex=True)), trace, cursor_step)
    fig.suptitle(timeline_title(trace))
    return fig


def timeline_title(trace: Trace) -> str:
    """"<scenario or file name>: N steps, K prefill"."""
    rows = trace.steps
    name = trace.header.get("scenario") or (trace.path.name if trace.path else "trace")
    return say(words.TIMELINE_TITLE, name=name, steps=len(rows), prefill=sum(r.phase == "prefill" for r in rows))


def cursor_lines(figure: Figure | SubFigure) -> list[Line2D]:
    """The cursor lines drawn in ``figure`` (one per panel), in panel order."""
    return [line for ax in figure.get_axes() for line in ax.get_lines() if line.get_gid() == "cursor"]


def move_cursor(figure: Figure | SubFigure, step: int) -> None:
    """Move every cursor line of ``figure`` to ``step`` (the figure keeps everything else)."""
    for line in cursor_lines(figure):
        line.set_xdata([step, step])


def save_timelines(trace: Trace, path: str | Path) -> Path:
    """Write the timelines of ``trace`` as a PNG (or any format matplotlib infers from the suffix)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    plot_timelines(trace).savefig(path, dpi=110)
    return path
