"""Timelines over engine steps, drawn from a trace's step table alone.

One panel per quantity a learner watches: batch size, KV blocks used out of the total, step latency,
tokens computed per step, and the waiting/running queue lengths. Prefill steps and decode steps get
different colours everywhere, preemptions are marked, and an optional cursor shows the current step.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from nanovllm_teach.trace.reader import Trace

PHASE_COLORS = {"prefill": "#d95f02", "decode": "#1b9e77"}
PREEMPT_COLOR = "#7570b3"


def _bars(ax: Axes, steps: list[int], values: list[float], phases: list[str]) -> None:
    ax.bar(steps, values, width=1.0, color=[PHASE_COLORS[p] for p in phases], linewidth=0)


def plot_timelines(trace: Trace, cursor_step: int | None = None, figure: Figure | None = None) -> Figure:
    """Draw the five timelines of ``trace`` (into ``figure`` if given, e.g. a widget's figure)."""
    rows = trace.steps
    if not rows:
        raise ValueError(f"trace {trace.path or '(in memory)'} has no completed engine step to draw")
    fig = figure or Figure(figsize=(11, 9))
    fig.clear()
    axes = fig.subplots(5, 1, sharex=True)
    steps = [r.step for r in rows]
    phases = [r.phase for r in rows]

    _bars(axes[0], steps, [r.batch_size for r in rows], phases)
    axes[0].set_ylabel("batch size")

    total_blocks = rows[0].used_blocks + rows[0].free_blocks
    axes[1].fill_between(steps, [r.used_blocks for r in rows], step="mid", color="#666666", alpha=0.6)
    peak_used = max(r.used_blocks for r in rows)
    # Scale to what is used; the cache's capacity is drawn only when it is on a comparable scale.
    axes[1].set_ylim(0, min(total_blocks, peak_used * 1.25 + 1) * 1.05)
    if total_blocks <= peak_used * 1.25 + 1:
        axes[1].axhline(total_blocks, color="black", linewidth=0.8, linestyle="--")
    axes[1].set_ylabel(f"KV blocks used\n(of {total_blocks})")

    _bars(axes[2], steps, [r.latency_ms for r in rows], phases)
    axes[2].set_ylabel("step latency (ms)")
    if max(r.latency_ms for r in rows) > 20 * min(r.latency_ms for r in rows):
        axes[2].set_yscale("log")

    _bars(axes[3], steps, [r.num_batched_tokens or 0 for r in rows], phases)
    axes[3].set_ylabel("tokens computed")

    axes[4].step(steps, [r.waiting_len for r in rows], where="mid", label="waiting", color="#e7298a")
    axes[4].step(steps, [r.running_len for r in rows], where="mid", label="running", color="#1f78b4")
    axes[4].set_ylabel("queue length")
    axes[4].set_xlabel("engine step")
    axes[4].legend(loc="upper right", fontsize=8)

    preempt_steps = [r.step for r in rows if r.preempted]
    for ax in axes:
        for step in preempt_steps:
            ax.axvline(step, color=PREEMPT_COLOR, linewidth=0.8, alpha=0.7)
        if cursor_step is not None:
            ax.axvline(cursor_step, color="red", linewidth=1.2)
    handles = [Patch(color=c, label=p) for p, c in PHASE_COLORS.items()]
    if preempt_steps:
        handles.append(Line2D([], [], color=PREEMPT_COLOR, label="preemption"))
    axes[0].legend(handles=handles, loc="upper right", fontsize=8)
    title = trace.header.get("scenario") or (trace.path.name if trace.path else "trace")
    fig.suptitle(f"{title}: {len(rows)} steps, {sum(p == 'prefill' for p in phases)} prefill")
    fig.tight_layout()
    return fig


def save_timelines(trace: Trace, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    plot_timelines(trace).savefig(path, dpi=110)
    return path
