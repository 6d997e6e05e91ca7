"""The KV block grid: every block of the paged KV cache as one cell (or, for large caches, one cell per
group of blocks), at one engine step.

- a used block is filled with the colour of the request that holds it (``style.seq_color``);
- a shared prefix block (held by several requests through prefix-cache hits) gets a thick black edge
  and, on grids small enough to read, its reference count ``×N``;
- a free block that still holds a hashed, full block of tokens ("cached": a later prefix-cache hit can
  reuse it without recomputing) is grey; a plain free block is white. Which free blocks are cached is
  derived from the events (see ``replay``: "hashed" blocks);
- the step convention of every picture (step N as it ran): blocks the step's finished requests freed at
  its end are still drawn in their holder's colour, faded (``freed``), as the timelines still count them
  over step N.

Scale: up to ``MAX_CELLS`` blocks each get a cell. A larger cache is drawn in groups of ``group``
consecutive blocks per cell (20,000 blocks: 20 per cell), each coloured by its occupancy: the darker, the
larger the share of its blocks in use (grey if none is used but some are cached). ``group_summary`` says
what one group holds, for the group a reader selects (the player's "block group" box), and a ``selected``
group gets a red edge. The title sums up the whole cache (used, shared, cached, free). Cell texts (reference
counts, the owner's seq id at the start of each run of its blocks) appear on grids of at most ``LABEL_CELLS``
cells, where they can be read.

The cells are one ``PolyCollection`` (gid ``blocks``) with one square per cell, in block id order, each with
its own face colour, edge colour and edge width; the texts have gid ``refcount`` or ``owner``. Tests and the
player can check what was drawn from those.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib import colormaps
from matplotlib.colors import to_rgba, to_rgba_array
from matplotlib.figure import Figure, SubFigure
from matplotlib.patches import Patch
from matplotlib.text import Text

from nanovllm_teach.i18n import say
from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.trace.replay import EngineReplay, KVSnapshot
from nanovllm_teach.viz import words
from nanovllm_teach.viz.render import NotebookFigure, as_written
from nanovllm_teach.viz.style import CACHED_COLOR, FREED_ALPHA, GRID_BACKGROUND, FREE_COLOR, SEQ_PALETTE, seq_color

MAX_CELLS = 1024
# Grids up to this many cells get texts (at the CPU default of 341 blocks too); beyond, they would be
# unreadable.
LABEL_CELLS = 512
_CELL = 0.9  # cell size; the grid pitch is 1
_SHARED_EDGE_WIDTH = 1.6
_SELECTED_EDGE_WIDTH = 2.4
_PALETTE_RGBA = to_rgba_array(SEQ_PALETTE)
_FREE_RGBA, _CACHED_RGBA, _SHARED_EDGE_RGBA = to_rgba(FREE_COLOR), to_rgba(CACHED_COLOR), to_rgba("black")
_SELECTED_RGBA = to_rgba("red")
_OCCUPANCY = colormaps["Blues"]


@dataclass(frozen=True, slots=True)
class GridLayout:
    """How the blocks are drawn: ``group`` consecutive blocks per cell (1: one cell per block), in
    ``columns`` columns."""

    num_blocks: int
    group: int
    columns: int

    @property
    def num_cells(self) -> int:
        return -(-self.num_blocks // self.group)

    @property
    def num_rows(self) -> int:
        return -(-self.num_cells // self.columns)

    def cell(self, block_id: int) -> int:
        return block_id // self.group

    def position(self, block_id: int) -> tuple[int, int]:
        """(column, row) of the cell drawing ``block_id``."""
        cell = self.cell(block_id)
        return cell % self.columns, cell // self.columns

    def blocks(self, cell: int) -> range:
        """The block ids cell ``cell`` draws."""
        return range(cell * self.group, min((cell + 1) * self.group, self.num_blocks))


def grid_layout(kv: KVSnapshot, max_cells: int = MAX_CELLS) -> GridLayout:
    """One cell per block if they fit in ``max_cells``; otherwise the fewest blocks per cell that fit."""
    group = max(1, -(-kv.num_blocks // max_cells))
    n = -(-kv.num_blocks // group)
    columns = 16 if n <= 128 else 32
    return GridLayout(kv.num_blocks, group, min(columns, max(n, 1)))


def summary_line(kv: KVSnapshot, layout: GridLayout | None = None, freed: dict[int, int] | None = None) -> str:
    """The grid's title: the step, then ``cache_summary``."""
    return say(words.GRID_TITLE, step=kv.step, summary=cache_summary(kv, layout, freed))


def cache_summary(kv: KVSnapshot, layout: GridLayout | None = None, freed: dict[int, int] | None = None) -> str:
    """The whole cache in the kinds the legend draws (used, freed at the step's end, cached, free: they add
    up to the cache), and, for a grouped grid, what a cell is."""
    shared = kv.shared
    gone = {b for b in (freed or {}) if b not in kv.holders}  # drawn faded in their holder's colour
    cached = len(set(kv.cached_free) - gone)
    max_refs = say(words.GRID_MAX_REFS, refs=max(shared.values())) if shared else ""
    text = say(words.GRID_SUMMARY, used=kv.num_used, shared=len(shared), max_refs=max_refs,
               freed=say(words.GRID_FREED, freed=len(gone)) if gone else "", cached=cached,
               free=kv.num_free - len(gone) - cached, total=kv.num_blocks)
    if layout is not None and layout.group > 1:
        text += "\n" + say(words.GRID_CELL, group=layout.group)
    return text


def group_summary(kv: KVSnapshot, layout: GridLayout, cell: int) -> str:
    """What one cell's blocks hold: ``blocks 200–219: 12 used (seq 3: 8, seq 7: 4), 2 cached, 6 free``."""
    blocks = layout.blocks(cell)
    owners: dict[int, int] = {}
    used = cached = 0
    for b in blocks:
        seqs = kv.holders.get(b)
        if seqs is not None:
            used += 1
            for sid in seqs:
                owners[sid] = owners.get(sid, 0) + 1
        elif b in kv.cached_free:
            cached += 1
    who = ", ".join(f"{say(words.SEQ, seq_id=sid)}: {n}" for sid, n in sorted(owners.items()))
    return say(words.GROUP_SUMMARY, first=blocks.start, last=blocks.stop - 1, used=used,
               who=say(words.IN_BRACKETS, inner=who) if who else "", cached=cached,
               free=len(blocks) - used - cached)


class BlockGrid:
    """The artists of a block grid in one ``Axes``, updated in place from one step's snapshot to the next.

    ``update(kv)`` recolours the cells and rewrites the labels and the title, the summary line; the cells'
    positions, the axes limits and ticks change only when the stretch of blocks drawn (the returned
    ``GridLayout``) changes.
    """

    def __init__(self, ax: Axes, max_cells: int = MAX_CELLS, legend: bool = True) -> None:
        self.ax = ax
        self.max_cells = max_cells
        self.layout: GridLayout | None = None
        # No cell edges: the gaps between cells show the axes' grey background, so white (free) cells stay
        # visible, and thousands of cells draw faster without strokes. Only shared blocks get an edge.
        self.cells = ax.add_collection(PolyCollection([], gid="blocks", edgecolors="none"))
        self.labels: list[Text] = []
        ax.set_facecolor(GRID_BACKGROUND)
        self.legend = legend
        ax.set_xticks([])
        ax.set_aspect("equal")
        ax.set_ylabel(say(words.FIRST_BLOCK_OF_ROW), fontsize=8)

    def update(self, kv: KVSnapshot, freed: dict[int, int] | None = None,
               selected: int | None = None) -> GridLayout:
        """Show ``kv``; ``freed``: blocks the step freed at its end -> the seq that held them (drawn faded);
        ``selected``: a cell to outline. Returns the layout."""
        layout = grid_layout(kv, self.max_cells)
        if layout != self.layout:
            self._lay_out(layout)
        n = layout.num_cells
        if layout.group == 1:
            faces, edges, widths = self._block_colours(kv, freed or {}, n)
        else:
            faces, edges, widths = self._group_colours(kv, layout)
        if selected is not None and 0 <= selected < n:
            edges[selected], widths[selected] = _SELECTED_RGBA, _SELECTED_EDGE_WIDTH
        self.cells.set_facecolor(faces)
        self.cells.set_edgecolor(edges)
        self.cells.set_linewidth(widths)
        self._relabel(kv, layout)
        self.ax.set_title(summary_line(kv, layout, freed if layout.group == 1 else None), fontsize=8)
        return layout

    @staticmethod
    def _block_colours(kv: KVSnapshot, freed: dict[int, int], n: int) -> tuple[np.ndarray, ...]:
        faces = np.tile(_FREE_RGBA, (n, 1))
        edges = np.zeros((n, 4))  # transparent
        widths = np.zeros(n)
        faces[[b for b in kv.cached_free if b < n]] = _CACHED_RGBA
        gone = [(b, sid) for b, sid in freed.items() if b < n and b not in kv.holders]
        if gone:
            index = np.array([b for b, _ in gone])
            faces[index] = _PALETTE_RGBA[[sid % len(SEQ_PALETTE) for _, sid in gone]]
            faces[index, 3] = FREED_ALPHA
        drawn = [(b, seqs) for b, seqs in kv.holders.items() if b < n]
        if drawn:
            index = np.array([b for b, _ in drawn])
            faces[index] = _PALETTE_RGBA[[seqs[0] % len(SEQ_PALETTE) for _, seqs in drawn]]
            shared = np.array([len(seqs) > 1 for _, seqs in drawn])
            edges[index[shared]] = _SHARED_EDGE_RGBA
            widths[index[shared]] = _SHARED_EDGE_WIDTH
        return faces, edges, widths

    @staticmethod
    def _group_colours(kv: KVSnapshot, layout: GridLayout) -> tuple[np.ndarray, ...]:
        n, group = layout.num_cells, layout.group
        sizes = np.full(n, group)
        sizes[-1] = kv.num_blocks - group * (n - 1)
        used = np.bincount(np.fromiter(kv.holders, int, len(kv.holders)) // group, minlength=n)[:n]
        cached = np.bincount(np.fromiter(kv.cached_free, int, len(kv.cached_free)) // group, minlength=n)[:n]
        faces = np.tile(_FREE_RGBA, (n, 1))
        faces[cached > 0] = _CACHED_RGBA
        busy = used > 0
        faces[busy] = _OCCUPANCY(0.3 + 0.7 * used[busy] / sizes[busy])
        return faces, np.zeros((n, 4)), np.zeros(n)

    def _relabel(self, kv: KVSnapshot, layout: GridLayout) -> None:
        for label in self.labels:
            label.remove()
        self.labels = []
        if layout.num_cells > LABEL_CELLS or layout.group > 1:
            return
        size = 7 if layout.columns <= 16 else 6
        previous_owner = None  # an owner is labelled once per run of its consecutive blocks in a row
        for block_id in sorted(kv.holders):
            col, row = layout.position(block_id)
            seqs = kv.holders[block_id]
            if len(seqs) > 1:
                self._label(col, row, f"×{len(seqs)}", "refcount", _text_color(seqs[0]), size)
            elif seqs[0] != previous_owner or col == 0 or kv.holders.get(block_id - 1) != seqs:
                self._label(col, row, str(seqs[0]), "owner", _text_color(seqs[0]), size)
            previous_owner = seqs[0] if len(seqs) == 1 else None

    def _label(self, col: int, row: int, text: str, gid: str, color: str, size: float) -> None:
        self.labels.append(self.ax.text(col, row, text, ha="center", va="center", fontsize=size, color=color,
                                        fontweight="bold", gid=gid))

    def _legend(self, layout: GridLayout) -> None:
        if layout.group == 1:
            handles = [Patch(facecolor=seq_color(0), label=say(words.USED_BY_SEQ)),
                       Patch(facecolor=to_rgba(seq_color(0), FREED_ALPHA), label=say(words.FREED_AT_STEP_END)),
                       Patch(facecolor="white", edgecolor="black", linewidth=1.6, label=say(words.SHARED))]
        else:
            handles = [Patch(facecolor=_OCCUPANCY(1.0), label=say(words.GROUP_ALL_USED, group=layout.group)),
                       Patch(facecolor=_OCCUPANCY(0.3 + 0.7 / layout.group), label=say(words.GROUP_ONE_USED))]
        handles += [Patch(facecolor=CACHED_COLOR, label=say(words.CACHED)),
                    Patch(facecolor=FREE_COLOR, edgecolor="#999999", linewidth=0.5, label=say(words.FREE))]
        self.ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)

    def _lay_out(self, layout: GridLayout) -> None:
        self.layout = layout
        if self.legend:
            self._legend(layout)
        offsets = np.arange(layout.num_cells)
        cols, rows = offsets % layout.columns, offsets // layout.columns
        corners = np.array([(-1, -1), (1, -1), (1, 1), (-1, 1)]) * (_CELL / 2)
        self.cells.set_verts(np.stack([cols, rows], axis=1)[:, None, :] + corners[None, :, :])
        self.ax.set_xlim(-0.6, layout.columns - 0.4)
        self.ax.set_ylim(layout.num_rows - 0.4, -0.6)  # block ids grow left to right, top to bottom
        ticks = list(range(0, layout.num_rows, -(-layout.num_rows // 12)))  # at most 12 labelled rows
        self.ax.set_yticks(ticks)
        self.ax.set_yticklabels([str(r * layout.columns * layout.group) for r in ticks], fontsize=7)


def _text_color(seq_id: int) -> str:
    """Black on the palette's light colours, white on its dark ones (by the colour's luminance)."""
    r, g, b, _ = _PALETTE_RGBA[seq_id % len(SEQ_PALETTE)]
    return "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.6 else "white"


def freed_at_step_end(trace: Trace) -> dict[int, dict[int, int]]:
    """For each step, the blocks its finished requests freed at its end: ``{step: {block_id: seq_id}}``."""
    freed: dict[int, dict[int, int]] = {}
    for e in trace.events_named("BLOCK_FREE"):
        if e.step is not None and e.reason == "finished":
            freed.setdefault(e.step, {}).update(dict.fromkeys(e.stats.freed_block_ids, e.stats.seq_id))
    return freed


def draw_block_grid(ax: Axes, kv: KVSnapshot, max_cells: int = MAX_CELLS, legend: bool = True,
                    freed: dict[int, int] | None = None) -> GridLayout:
    """Draw the cells of ``kv`` into ``ax`` (an empty Axes); returns the layout used."""
    return BlockGrid(ax, max_cells, legend).update(kv, freed)


@as_written
def plot_block_grid(trace: Trace | EngineReplay, step: int, figure: Figure | SubFigure | None = None,
                    max_cells: int = MAX_CELLS) -> Figure | SubFigure:
    """The KV block grid of ``trace`` at ``step``: the blocks held at its end, and faded, those its finished
    requests freed at its end (pass an ``EngineReplay`` to reuse one)."""
    replay = trace if isinstance(trace, EngineReplay) else EngineReplay(trace)
    kv = replay.kv_at(step)
    freed = freed_at_step_end(replay.trace).get(step)
    if figure is None:
        rows = grid_layout(kv, max_cells).num_rows
        figure = NotebookFigure(figsize=(8, min(9.0, 1.6 + 0.28 * rows)), layout="constrained")
    figure.clear()
    draw_block_grid(figure.subplots(), kv, max_cells, freed=freed)
    return figure
