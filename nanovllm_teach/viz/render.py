"""Figures to PNG bytes with the Agg backend: no pyplot, no global state, no display needed.

PNG bytes work everywhere a picture must show up: an ``ipywidgets.Image`` in JupyterLab or VS Code
(without ipympl), a base64 ``<img>`` in an HTML report, a file.

``BlitPicture`` makes small changes cheap: the figure is drawn once without the artists that change
(its "animated" artists), the rendered pixels are kept, and each new picture restores those pixels and
draws only the changing artists (matplotlib's "blitting") before encoding the PNG. ``CursorPicture`` is
the case of a figure whose only change is the position of its cursor lines.

``NotebookFigure`` is what the ``plot_*`` functions return: it displays itself in a notebook. Those
functions draw ``as_written``: with matplotlib's mathtext off, so a "$" in a trace's strings is a dollar.
"""

from __future__ import annotations

import functools
import io
from typing import Callable, TypeVar

from matplotlib import rc_context
from matplotlib.artist import Artist
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from PIL import Image as PILImage

_Draw = TypeVar("_Draw", bound=Callable)


def as_written(draw: _Draw) -> _Draw:
    """``draw`` with mathtext off for the texts it creates: a picture's words are meant literally (a scenario
    named "a$b{$" would otherwise be read as a broken formula and fail the drawing)."""
    @functools.wraps(draw)
    def drawn(*args, **kwargs):
        with rc_context({"text.parse_math": False}):  # read when each text is made
            return draw(*args, **kwargs)
    return drawn  # type: ignore[return-value]


# zlib level 1: a few times faster than the default and barely larger for flat-coloured plots.
_PNG_COMPRESS_LEVEL = 1


def figure_png(figure: Figure, dpi: float = 100) -> bytes:
    """Render ``figure`` to PNG bytes (a full draw)."""
    FigureCanvasAgg(figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


class NotebookFigure(Figure):
    """The figure every ``plot_*`` function returns: a plain ``Figure`` that also shows itself as a picture
    when it is a notebook cell's value.

    The figures here are drawn without pyplot, so IPython's inline backend never hears of them and would
    print ``<Figure size ...>``; IPython asks an object without a known display for ``_repr_png_``.
    """

    def _repr_png_(self) -> bytes:
        return figure_png(self)


def canvas_png(canvas: FigureCanvasAgg) -> bytes:
    """Encode what ``canvas`` holds now (no redraw) as PNG bytes."""
    width, height = canvas.get_width_height(physical=True)
    image = PILImage.frombuffer("RGBA", (width, height), canvas.buffer_rgba(), "raw", "RGBA", 0, 1)
    # The figures are opaque: dropping the alpha channel leaves a quarter less to compress.
    image = image.convert("RGB")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=_PNG_COMPRESS_LEVEL)
    return buffer.getvalue()


class BlitPicture:
    """A figure whose changing artists are redrawn over the kept pixels of everything else.

    The changing artists must be "animated" (``artist.set_animated(True)``): a full draw leaves them out,
    so the pixels kept after it (``capture``) are the unchanging rest of the figure.
    """

    def __init__(self, figure: Figure, dpi: float = 72) -> None:
        self.figure = figure
        figure.set_dpi(dpi)
        self.canvas = FigureCanvasAgg(figure)
        self.capture()

    def capture(self) -> None:
        """Draw the figure in full (animated artists excepted) and keep its pixels."""
        self.canvas.draw()
        self._background = self.canvas.copy_from_bbox(self.figure.bbox)

    def png(self, changing: list[Artist]) -> bytes:
        """The kept pixels with ``changing`` drawn over them, as PNG bytes."""
        self.canvas.restore_region(self._background)
        for artist in changing:
            if artist.axes is not None:
                artist.axes.draw_artist(artist)
            else:
                self.figure.draw_artist(artist)
        return canvas_png(self.canvas)


class CursorPicture(BlitPicture):
    """A figure whose vertical cursor lines move without redrawing the rest of it."""

    def __init__(self, figure: Figure, cursors: list[Line2D], dpi: float = 72) -> None:
        self.cursors = cursors
        for line in cursors:
            line.set_animated(True)
        super().__init__(figure, dpi)

    def png_at(self, x: float) -> bytes:
        """The figure with its cursor lines at ``x``."""
        for line in self.cursors:
            line.set_xdata([x, x])
        return self.png(self.cursors)
