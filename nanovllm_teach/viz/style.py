"""Colours and markers shared by every picture, so a phase or a request looks the same everywhere."""

from __future__ import annotations

from matplotlib import colormaps
from matplotlib.colors import to_hex

PHASE_COLORS = {"prefill": "#d95f02", "decode": "#1b9e77"}
PREEMPT_COLOR = "#7570b3"
# A simulated step's bound (STEP_DONE.bound), on the latency timeline.
BOUND_COLORS = {"compute": "#e7298a", "memory": "#1f78b4", "launch": "#e6ab02"}
CURSOR_COLOR = "red"

# Gantt chart: one colour per state a request can be in during a step.
STATE_COLORS = {
    "waiting": "#d9d9d9",
    "preempted": "#bcb6e3",  # waiting again, after a preemption: a lighter PREEMPT_COLOR
    "prefill": PHASE_COLORS["prefill"],
    "decode": PHASE_COLORS["decode"],
    "stalled": "#a6dbcc",  # admitted, but another request's prefill step ran: a lighter decode colour
    "held": "#ffffff",  # static batching: finished, its slot held until the batch ends (drawn dotted)
}

# How a request ended -> its marker (the words: ``words.FINISHED``). EOS and the token limit must be told apart
# at a glance.
FINISH_MARKERS = {"eos": "o", "length": "|", "max_model_len": ">", "stop": "s", "aborted": "x"}

# KV block grid.
FREE_COLOR = "#ffffff"
CACHED_COLOR = "#a0a0a0"  # free, but still hashed: a prefix-cache hit can reuse it
# Blocks the step's finished requests freed at its end: their holder's colour at this opacity (the
# static grid, the Player and the replay page alike).
FREED_ALPHA = 0.35
GRID_BACKGROUND = "#e3e3e3"  # seen in the gaps between cells

# tab20 without its two greys (grey means "cached" in the block grid): its nine strong colours first, then
# their light partners, so that neighbouring seq ids never get two shades of one colour.
_TAB20 = colormaps["tab20"].colors
SEQ_PALETTE = [to_hex(_TAB20[i]) for i in (*range(0, 20, 2), *range(1, 20, 2)) if i not in (14, 15)]


def seq_color(seq_id: int) -> str:
    """The colour of request ``seq_id`` (18 colours, repeating)."""
    return SEQ_PALETTE[seq_id % len(SEQ_PALETTE)]
