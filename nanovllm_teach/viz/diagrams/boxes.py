"""The drawing primitives of the explanatory diagrams: a blank canvas in data units, boxes with a title and
lines of text, arrows along a path, and labels on a white ground so that a line under them never strikes
through a word.

Every diagram draws on one axes spanning the whole figure, its axis turned off, so that positions are in
the diagram's own units (``canvas(width, height)``: x from 0 to ``width``, y from 0 to ``height``) and the
figure keeps the aspect of the drawing.

No torch. Emits no events.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.axes import Axes
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle
from matplotlib.path import Path

from nanovllm_teach.viz.fonts import add_cjk_fallback
from nanovllm_teach.viz.render import NotebookFigure

# Inches per unit of a diagram: every diagram is drawn at the same scale, so the same font size reads the
# same in all of them.
INCHES_PER_UNIT = 0.85
INK = "#222222"
MUTED = "#666666"
CODE_FONT = "monospace"


def canvas(width: float, height: float) -> tuple[NotebookFigure, Axes]:
    """A figure of ``width`` × ``height`` diagram units and its one axes, in those units."""
    add_cjk_fallback()  # a font installed after the package was imported is found too
    fig = NotebookFigure(figsize=(width * INCHES_PER_UNIT, height * INCHES_PER_UNIT))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_axis_off()
    return fig, ax


def box(ax: Axes, x: float, y: float, width: float, height: float, *, face: str = "white", edge: str = INK,
        linewidth: float = 1.2, dashed: bool = False, rounded: bool = True, gid: str | None = None) -> FancyBboxPatch:
    """A box with its lower left corner at (x, y)."""
    style = "round,pad=0,rounding_size=0.12" if rounded else "square,pad=0"
    patch = FancyBboxPatch((x, y), width, height, boxstyle=style, facecolor=face, edgecolor=edge,
                           linewidth=linewidth, linestyle="--" if dashed else "-", gid=gid, zorder=1)
    ax.add_patch(patch)
    return patch


def cell(ax: Axes, x: float, y: float, width: float, height: float, text: str = "", *, face: str = "white",
         edge: str = INK, size: float = 8, color: str = INK, code: bool = False, gid: str | None = None) -> None:
    """A square-cornered cell with its text centred (a token, a block id, a slot)."""
    ax.add_patch(Rectangle((x, y), width, height, facecolor=face, edgecolor=edge, linewidth=0.9, gid=gid, zorder=1))
    if text:
        ax.text(x + width / 2, y + height / 2, text, ha="center", va="center", fontsize=size, color=color,
                family=CODE_FONT if code else None, zorder=3)


def titled_box(ax: Axes, x: float, y: float, width: float, height: float, title: str, lines: Sequence[str] = (),
               *, subtitle: str = "", face: str = "white", edge: str = INK, size: float = 8,
               code_lines: bool = False, gid: str | None = None) -> None:
    """A box with a bold title (and a grey subtitle) at its top and ``lines`` below them, left-aligned."""
    box(ax, x, y, width, height, face=face, edge=edge, gid=gid)
    top = y + height - 0.12
    ax.text(x + 0.15, top, title, ha="left", va="top", fontsize=size + 1.5, weight="bold", color=INK, zorder=3)
    top -= 0.32
    if subtitle:
        ax.text(x + 0.15, top, subtitle, ha="left", va="top", fontsize=size - 0.5, color=MUTED, zorder=3,
                linespacing=1.15)
        top -= 0.22 * (subtitle.count("\n") + 1) + 0.06
    for line in lines:
        ax.text(x + 0.15, top, line, ha="left", va="top", fontsize=size - 0.5, color=INK, zorder=3,
                family=CODE_FONT if code_lines else None)
        top -= 0.22


def arrow(ax: Axes, points: Sequence[tuple[float, float]], *, color: str = INK, width: float = 1.3,
          dashed: bool = False, head: float = 9, gid: str | None = None) -> FancyArrowPatch:
    """An arrow along the polyline ``points`` (its head at the last point)."""
    codes = [Path.MOVETO] + [Path.LINETO] * (len(points) - 1)
    patch = FancyArrowPatch(path=Path(list(points), codes), arrowstyle=f"-|>,head_length={head / 20},"
                            f"head_width={head / 36}", color=color, linewidth=width,
                            linestyle="--" if dashed else "-", gid=gid, zorder=2, mutation_scale=12)
    ax.add_patch(patch)
    return patch


def label(ax: Axes, x: float, y: float, text: str, *, size: float = 8, color: str = INK, ha: str = "center",
          va: str = "center", weight: str = "normal", rotation: float = 0, ground: bool = True,
          code: bool = False, gid: str | None = None) -> None:
    """A text at (x, y), on a white ground unless ``ground`` is False."""
    bbox = {"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none"} if ground else None
    ax.text(x, y, text, ha=ha, va=va, fontsize=size, color=color, weight=weight, rotation=rotation, bbox=bbox,
            family=CODE_FONT if code else None, zorder=4, gid=gid, linespacing=1.2)
