"""Pictures of traces: timelines, the request Gantt chart, the KV block grid, side-by-side comparisons,
an HTML report, and (in a notebook) the step-through player.

Like ``nanovllm_teach.trace``, nothing here imports torch: a trace replays on a machine with only
matplotlib (and anywidget for the player). Figures are ``NotebookFigure``s: plain
``matplotlib.figure.Figure`` objects drawn with the Agg backend (pyplot's global state is never touched) that
show themselves as a picture when they are a notebook cell's value.

``Player`` is imported on first use, so the rest works where anywidget is not installed. Chinese text is
drawn with the machine's CJK font (``fonts``).
"""

from typing import Any

from nanovllm_teach.viz.blockgrid import draw_block_grid, plot_block_grid
from nanovllm_teach.viz.compare import Comparison, TraceSummary, compare, format_summaries, summarize
from nanovllm_teach.viz.fonts import add_cjk_fallback
from nanovllm_teach.viz.gantt import draw_gantt, plot_gantt
from nanovllm_teach.viz.render import NotebookFigure, figure_png
from nanovllm_teach.trace.replay import EngineReplay, KVSnapshot, Queues
from nanovllm_teach.trace.segments import Segment, held_segments, request_segments
from nanovllm_teach.viz.report import html_report, plot_overview, save_overview, write_html_report
from nanovllm_teach.viz.timeline import move_cursor, plot_timelines, save_timelines

add_cjk_fallback()

__all__ = [
    "Comparison", "EngineReplay", "KVSnapshot", "NotebookFigure", "Player", "Queues", "Segment", "TraceSummary",
    "compare", "draw_block_grid", "draw_gantt", "figure_png", "format_summaries", "html_report", "move_cursor",
    "held_segments", "plot_block_grid", "plot_gantt", "plot_overview", "plot_timelines", "request_segments", "save_overview",
    "save_timelines", "summarize", "write_html_report",
]


def __getattr__(name: str) -> Any:
    if name == "Player":
        from nanovllm_teach.viz.player import Player
        return Player
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
