"""Figures to PNG bytes with the Agg backend: no pyplot, no global state, no display needed.

PNG bytes work everywhere a picture must show up: a notebook cell's value, a base64 ``<img>`` in an HTML
report, the Player's static fallback, a file.

``NotebookFigure`` is what the ``plot_*`` functions return: it displays itself in a notebook. Those
functions draw ``as_written``: with matplotlib's mathtext off, so a "$" in a trace's strings is a dollar,
but on for the axes' own tick labels (a log axis writes 10¹ as mathtext).
"""

from __future__ import annotations

import functools
import io
from typing import Callable, TypeVar

from matplotlib import rc_context
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

_Draw = TypeVar("_Draw", bound=Callable)


def as_written(draw: _Draw) -> _Draw:
    """``draw`` with mathtext off for the texts it creates: a picture's words are meant literally (a scenario
    named "a$b{$" would otherwise be read as a broken formula and fail the drawing). The tick labels and
    offset texts that the axes made meanwhile get it back: a log axis labels its ticks
    ``$\\mathdefault{10^{1}}$``, which must be drawn as 10¹ (ticks made later, at drawing time, read the
    default, on)."""
    @functools.wraps(draw)
    def drawn(*args, **kwargs):
        with rc_context({"text.parse_math": False}):  # read when each text is made
            result = draw(*args, **kwargs)
        figure = result if isinstance(result, Figure) else getattr(result, "figure", None)
        if isinstance(figure, Figure):
            _axis_math_on(figure)
        return result
    return drawn  # type: ignore[return-value]


def _axis_math_on(figure: Figure) -> None:
    """Mathtext on for the axis-made texts of every axes in ``figure`` (its subfigures' included)."""
    for ax in figure.findobj(lambda artist: isinstance(artist, Axes)):
        for axis in (ax.xaxis, ax.yaxis):
            axis.offsetText.set_parse_math(True)
            for tick in axis.majorTicks + axis.minorTicks:
                tick.label1.set_parse_math(True)
                tick.label2.set_parse_math(True)



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
