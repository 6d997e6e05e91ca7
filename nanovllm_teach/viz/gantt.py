"""The request Gantt chart: one row per request, one column per engine step.

It is the drawn version of the ASCII timelines used to explain batching, where ``[===]`` is a request being
computed and ``....`` a finished request that still holds its place in a static batch::

    请求 A: [===]..................   (static: A finished, its slot is held until the batch ends)
    请求 E:      [================]   (continuous: E joins as soon as A leaves)

Each row shows, step by step (see ``trace.segments.Segment``): waiting (grey), prefill (one block per step, so
the chunks of a chunked prompt are separate blocks), decode, stalled (admitted but left out of another
request's prefill step), waiting again after a preemption (lilac, with a triangle where the preemption
happened), and, for static batching, the dotted stretch a finished request's slot is held. The end marker
says how the request finished: a dot for EOS, a bar for max_tokens (see ``style.FINISH_MARKERS``).

Every artist carries a ``gid`` (``gantt-<state>``, ``finish-<reason>``, ``preempt``, ``cursor``) so tests
and the player can find what was drawn.
"""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure, SubFigure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from nanovllm_teach.i18n import say
from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.trace.segments import Segment, held_segments, request_segments
from nanovllm_teach.viz import words
from nanovllm_teach.viz.messages import IN_MEMORY, NO_REQUEST_TO_DRAW
from nanovllm_teach.viz.render import NotebookFigure
from nanovllm_teach.viz.render import as_written
from nanovllm_teach.viz.style import CURSOR_COLOR, FINISH_MARKERS, PREEMPT_COLOR, STATE_COLORS

_BAR_HALF_HEIGHT = 0.38


def _rects(segments: list[Segment], row_of: dict[int, int]) -> list[list[tuple[float, float]]]:
    """Rectangles centred on the steps: step ``s`` spans x in [s - 0.5, s + 0.5], as the timelines' bars."""
    out = []
    for seg in segments:
        x0, x1 = seg.step_start - 0.5, seg.step_end - 0.5
        y = row_of[seg.seq_id]
        y0, y1 = y - _BAR_HALF_HEIGHT, y + _BAR_HALF_HEIGHT
        out.append([(x0, y0), (x1, y0), (x1, y1), (x0, y1)])
    return out


def draw_gantt(ax: Axes, trace: Trace, cursor_step: int | None = None, legend: bool = True) -> None:
    """Draw ``trace``'s request rows into ``ax`` (rows top to bottom in seq_id order)."""
    requests = trace.requests
    row_of = {r.seq_id: i for i, r in enumerate(requests)}
    segments = [seg for seg in request_segments(trace) if seg.seq_id in row_of] + held_segments(trace)
    by_state: dict[str, list[Segment]] = {}
    for seg in segments:
        by_state.setdefault(seg.state, []).append(seg)

    # Markers shrink with the rows once there are more than about 40 of them.
    marker_scale = min(1.0, 40 / max(len(requests), 1))
    handles = []
    for state, color in STATE_COLORS.items():
        segs = by_state.get(state)
        if not segs:
            continue
        if state == "held":
            style = dict(facecolors="none", edgecolors="#7f7f7f", hatch="...", linewidths=0.0)
        elif state == "prefill":
            # A white edge keeps neighbouring chunks of one prompt visibly apart.
            style = dict(facecolors=color, edgecolors="white", linewidths=1.0)
        else:
            style = dict(facecolors=color, edgecolors="none", linewidths=0.0)
        collection = PolyCollection(_rects(segs, row_of), gid=f"gantt-{state}", **style)
        ax.add_collection(collection, autolim=False)  # the limits are set below, from the steps and rows
        label = say(words.STATE[state])
        handles.append(Patch(facecolor=style["facecolors"], edgecolor="#7f7f7f" if state == "held" else color,
                             hatch=style.get("hatch"), label=label))

    preempts = [(e.step - 0.5, row_of[e.stats.seq_id]) for e in trace.events_named("PREEMPT")
                if e.step is not None and e.stats.seq_id in row_of]
    if preempts:
        xs, ys = zip(*preempts)
        ax.scatter(xs, ys, marker="v", s=40 * marker_scale, color=PREEMPT_COLOR, zorder=3, gid="preempt")
        handles.append(Line2D([], [], marker="v", linestyle="none", color=PREEMPT_COLOR, label=say(words.PREEMPTION)))

    # A request ends at the right edge of its finish step; one aborted between steps (no finish step)
    # at the right edge of the last step it was seen in.
    last_seen: dict[int, int] = {}
    for seg in segments:
        last_seen[seg.seq_id] = max(last_seen.get(seg.seq_id, seg.step_end), seg.step_end)
    end_x = {r.seq_id: r.finish_step + 0.5 if r.finish_step is not None else last_seen.get(r.seq_id, 1) - 0.5
             for r in requests if r.finish_reason is not None}
    for reason, marker in FINISH_MARKERS.items():
        ends = [(end_x[r.seq_id], row_of[r.seq_id]) for r in requests if r.finish_reason == reason]
        if ends:
            xs, ys = zip(*ends)
            size = (140 if marker == "|" else 55) * marker_scale  # a bar needs more height than a dot
            # Unclipped: the last step's finish markers sit on the right edge of the x range.
            ax.scatter(xs, ys, marker=marker, s=size, color="black", linewidths=2.0 * marker_scale, zorder=4,
                       gid=f"finish-{reason}", clip_on=False)
            handles.append(Line2D([], [], marker=marker, linestyle="none", color="black", markeredgewidth=1.8,
                                  label=say(words.FINISHED[reason])))

    rows = trace.steps
    if rows:
        ax.set_xlim(rows[0].step - 0.5, rows[-1].step + 0.5)  # the timelines' range, so the pictures line up
    ax.set_ylim(len(requests) - 0.5, -0.5)  # first request on top
    every = max(1, len(requests) // 40)  # at most ~40 labels, whatever the number of requests
    ax.set_yticks(range(0, len(requests), every))
    ax.set_yticklabels([say(words.SEQ, seq_id=requests[i].seq_id) for i in range(0, len(requests), every)],
                       fontsize=8)
    ax.set_xlabel(say(words.ENGINE_STEP))
    if cursor_step is not None:
        ax.axvline(cursor_step, color=CURSOR_COLOR, linewidth=1.2, gid="cursor")
    if legend and handles:
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8.5, frameon=False)


@as_written
def plot_gantt(trace: Trace, cursor_step: int | None = None,
               figure: Figure | SubFigure | None = None) -> Figure | SubFigure:
    """The Gantt chart of ``trace`` (into ``figure`` if given); an optional cursor marks one step."""
    if not trace.requests:
        raise ValueError(say(NO_REQUEST_TO_DRAW, path=trace.path or say(IN_MEMORY)))
    height = min(12.0, 1.4 + 0.28 * len(trace.requests))
    fig = figure if figure is not None else NotebookFigure(figsize=(11, height), layout="constrained")
    fig.clear()
    ax = fig.subplots()
    draw_gantt(ax, trace, cursor_step)
    ax.set_title(say(words.GANTT_TITLE), fontsize=10)
    return fig
