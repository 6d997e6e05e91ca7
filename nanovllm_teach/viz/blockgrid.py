"""The KV block grid: every block of the paged KV cache as one cell, at the end of one engine step.

- a used block is filled with the colour of the request that holds it (``style.seq_color``);
- a shared prefix block (held by several requests through prefix-cache hits) gets a thick black edge
  and, on grids small enough to read, its reference count ``×N``;
- a free block that still holds a hashed, full block of tokens ("cached": a later prefix-cache hit can
  reuse it without recomputing) is grey; a plain free block is white. Which free blocks are cached is
  derived from the events (see ``replay``: "hashed" blocks).

Large caches (thousands of blocks) are drawn in part: all blocks when there are at most ``max_cells``,
otherwise the stretch of ids from the first used or cached block, ``max_cells`` long. The title always
sums up the whole cache (used, shared, cached, free) and names the stretch drawn. Cell texts (reference
counts, the owner's seq id at the start of each run of its blocks) appear only on grids of at most
``LABEL_CELLS`` cells, where they can be read.

The cells are one ``PolyCollection`` (gid ``blocks``) with one square per drawn block, in block id order,
each with its own face colour, edge colour and edge width; the texts have gid ``refcount`` or ``owner``.
Tests and the player can check what was drawn from those.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgba, to_rgba_array
from matplotlib.figure import Figure, SubFigure
from matplotlib.patches import Patch
from matplotlib.text import Text

from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.trace.replay import EngineReplay, KVSnapshot
from nanovllm_teach.viz.render import NotebookFigure
from nanovllm_teach.viz.style import CACHED_COLOR, GRID_BACKGROUND, FREE_COLOR, SEQ_PALETTE, seq_color

MAX_CELLS = 2048
# Grids up to this many cells get texts; beyond, they would be unreadable (and each costs time to draw).
LABEL_CELLS = 128
_CELL = 0.9  # cell size; the grid pitch is 1
_SHARED_EDGE_WIDTH = 1.6
_PALETTE_RGBA = to_rgba_array(SEQ_PALETTE)
_FREE_RGBA, _CACHED_RGBA, _SHARED_EDGE_RGBA = to_rgba(FREE_COLOR), to_rgba(CACHED_COLOR), to_rgba("black")


@dataclass(frozen=True, slots=True)
class GridLayout:
    """Which block ids are drawn (``first`` .. ``last`` inclusive) and how many columns they take."""

    first: int
    last: int
    columns: int

    @property
    def num_cells(self) -> int:
        return self.last - self.first + 1

    @property
    def num_rows(self) -> int:
        return (self.num_cells + self.columns - 1) // self.columns

    def position(self, block_id: int) -> tuple[int, int]:
        """(column, row) of a drawn block."""
        return (block_id - self.first) % self.columns, (block_id - self.first) // self.columns


def grid_layout(kv: KVSnapshot, max_cells: int = MAX_CELLS) -> GridLayout:
    """All blocks if they fit in ``max_cells``; otherwise ``max_cells`` ids from the first non-free block."""
    if kv.num_blocks <= max_cells:
        first, last = 0, kv.num_blocks - 1
    else:
        busy = [*kv.holders, *kv.cached_free]
        first = min(min(busy) if busy else 0, kv.num_blocks - max_cells)
        last = first + max_cells - 1
    n = last - first + 1
    columns = 16 if n <= 128 else 32 if n <= 1024 else 64
    return GridLayout(first, last, min(columns, max(n, 1)))


def summary_line(kv: KVSnapshot, layout: GridLayout | None = None) -> str:
    """One line that sums up the whole cache (and, for a partial grid, the stretch drawn)."""
    shared = kv.shared
    cached = len(kv.cached_free)
    text = (f"step {kv.step}: {kv.num_used} used ({len(shared)} shared"
            + (f", max ×{max(shared.values())}" if shared else "") + f"), {cached} cached, "
            f"{kv.num_free - cached} free, of {kv.num_blocks} blocks")
    if layout is not None and layout.num_cells < kv.num_blocks:
        outside_used = sum(not layout.first <= b <= layout.last for b in kv.holders)
        outside_cached = sum(not layout.first <= b <= layout.last for b in kv.cached_free)
        text += (f"\ndrawn: blocks {layout.first}–{layout.last}; outside it: {outside_used} used, "
                 f"{outside_cached} cached")
    return text


class BlockGrid:
    """The artists of a block grid in one ``Axes``, updated in place from one step's snapshot to the next.

    ``update(kv)`` recolours the cells and rewrites the labels and (with ``title=True``) the title, the
    summary line; the cells' positions, the axes limits and ticks change only when the stretch of blocks
    drawn (the returned ``GridLayout``) changes. The player redraws just ``changing_artists()`` over the
    kept pixels of the rest: with ``animated=True`` they are matplotlib "animated" artists, left out of
    full draws.
    """

    def __init__(self, ax: Axes, max_cells: int = MAX_CELLS, legend: bool = True, animated: bool = False,
                 title: bool = True) -> None:
        self.ax = ax
        self.max_cells = max_cells
        self.animated = animated
        self.title = title
        self.layout: GridLayout | None = None
        # No cell edges: the gaps between cells show the axes' grey background, so white (free) cells stay
        # visible, and thousands of cells draw faster without strokes. Only shared blocks get an edge.
        self.cells = ax.add_collection(PolyCollection([], gid="blocks", animated=animated, edgecolors="none"))
        self.labels: list[Text] = []
        ax.set_facecolor(GRID_BACKGROUND)
        ax.title.set_animated(animated)
        if legend:
            handles = [Patch(facecolor=seq_color(0), label="used: colour of\nthe holding seq"),
                       Patch(facecolor="white", edgecolor="black", linewidth=1.6, label="shared (×refs)"),
                       Patch(facecolor=CACHED_COLOR, label="cached\n(free, hashed)"),
                       Patch(facecolor=FREE_COLOR, edgecolor="#999999", linewidth=0.5, label="free")]
            ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
        ax.set_xticks([])
        ax.set_aspect("equal")
        ax.set_ylabel("first block id of the row", fontsize=8)

    def changing_artists(self) -> list[Artist]:
        """What ``update`` changes: the cells, the labels and the title."""
        return [self.cells, *self.labels, *([self.ax.title] if self.title else [])]

    def update(self, kv: KVSnapshot) -> GridLayout:
        """Show ``kv``; returns the stretch of blocks drawn."""
        layout = grid_layout(kv, self.max_cells)
        if layout != self.layout:
            self._lay_out(layout)
        n = layout.num_cells
        faces = np.tile(_FREE_RGBA, (n, 1))
        edges = np.zeros((n, 4))  # transparent
        widths = np.zeros(n)
        cached = [b - layout.first for b in kv.cached_free if layout.first <= b <= layout.last]
        faces[cached] = _CACHED_RGBA
        drawn = [(b - layout.first, seqs) for b, seqs in kv.holders.items() if layout.first <= b <= layout.last]
        if drawn:
            index = np.array([i for i, _ in drawn])
            faces[index] = _PALETTE_RGBA[[seqs[0] % len(SEQ_PALETTE) for _, seqs in drawn]]
            shared = np.array([len(seqs) > 1 for _, seqs in drawn])
            edges[index[shared]] = _SHARED_EDGE_RGBA
            widths[index[shared]] = _SHARED_EDGE_WIDTH
        self.cells.set_facecolor(faces)
        self.cells.set_edgecolor(edges)
        self.cells.set_linewidth(widths)
        self._relabel(kv, layout)
        if self.title:
            self.ax.set_title(summary_line(kv, layout), fontsize=8)
        return layout

    def _relabel(self, kv: KVSnapshot, layout: GridLayout) -> None:
        for label in self.labels:
            label.remove()
        self.labels = []
        if layout.num_cells > LABEL_CELLS:
            return
        previous_owner = None  # an owner is labelled once per run of its consecutive blocks in a row
        for block_id in range(layout.first, layout.last + 1):
            col, row = layout.position(block_id)
            seqs = kv.holders.get(block_id)
            if seqs is not None and len(seqs) > 1:
                self._label(col, row, f"×{len(seqs)}", "refcount", _text_color(seqs[0]))
            elif seqs is not None and (seqs[0] != previous_owner or col == 0):
                self._label(col, row, str(seqs[0]), "owner", _text_color(seqs[0]))
            previous_owner = seqs[0] if seqs is not None and len(seqs) == 1 else None

    def _label(self, col: int, row: int, text: str, gid: str, color: str) -> None:
        self.labels.append(self.ax.text(col, row, text, ha="center", va="center", fontsize=7, color=color,
                                        fontweight="bold", gid=gid, animated=self.animated))

    def _lay_out(self, layout: GridLayout) -> None:
        self.layout = layout
        offsets = np.arange(layout.num_cells)
        cols, rows = offsets % layout.columns, offsets // layout.columns
        corners = np.array([(-1, -1), (1, -1), (1, 1), (-1, 1)]) * (_CELL / 2)
        self.cells.set_verts(np.stack([cols, rows], axis=1)[:, None, :] + corners[None, :, :])
        self.ax.set_xlim(-0.6, layout.columns - 0.4)
        self.ax.set_ylim(layout.num_rows - 0.4, -0.6)  # block ids grow left to right, top to bottom
        ticks = list(range(0, layout.num_rows, -(-layout.num_rows // 12)))  # at most 12 labelled rows
        self.ax.set_yticks(ticks)
        self.ax.set_yticklabels([str(layout.first + r * layout.columns) for r in ticks], fontsize=7)


def _text_color(seq_id: int) -> str:
    """Black on the palette's light colours, white on its dark ones (by the colour's luminance)."""
    r, g, b, _ = _PALETTE_RGBA[seq_id % len(SEQ_PALETTE)]
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.6 else "white"


def draw_block_grid(ax: Axes, kv: KVSnapshot, max_cells: int = MAX_CELLS, legend: bool = True) -> GridLayout:
    """Draw the cells of ``kv`` into ``ax`` (an empty Axes); returns the layout used."""
    return BlockGrid(ax, max_cells, legend).update(kv)


def plot_block_grid(trace: Trace | EngineReplay, step: int, figure: Figure | SubFigure | None = None,
                    max_cells: int = MAX_CELLS) -> Figure | SubFigure:
    """The KV block grid of ``trace`` at the end of ``step`` (pass an ``EngineReplay`` to reuse one)."""
    replay = trace if isinstance(trace, EngineReplay) else EngineReplay(trace)
    kv = replay.kv_at(step)
    if figure is None:
        rows = grid_layout(kv, max_cells).num_rows
        figure = NotebookFigure(figsize=(8, min(9.0, 1.6 + 0.28 * rows)), layout="constrained")
    figure.clear()
    draw_block_grid(figure.subplots(), kv, max_cells)
    return figure
