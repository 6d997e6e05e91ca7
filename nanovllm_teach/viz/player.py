"""The step-through player: a trace replayed in a notebook, one engine step at a time.

::

    from nanovllm_teach.trace import load_trace
    from nanovllm_teach.viz import Player
    player = Player(load_trace("traces/preemption.jsonl"))
    player            # or display(player.widget)
    player.set_step(12); player.lines; player.queues; player.kv

The widget, top to bottom: a Play button and a step slider; the step's header; the timelines and the
request Gantt chart as one picture on one x axis, with one cursor at the current step (the step
convention of every picture: step N's column is step N as it ran); then, side by side where the width
allows (from about 900 px) and one above the other below it, the queues after the step (waiting with the
preempted marked, running, finished in the step) with the KV block grid (the blocks held at the end of
the step, faded those freed at its end; a large cache in groups of blocks, with a "block group" box that
says what one group holds), and the TEACHING lines of the step (everything logged since the previous step
ended, as the console printed it, in the language and verbosity chosen; long lines wrap between fields,
never inside one).

Pictures are PNG bytes in ``ipywidgets.Image``s, rendered with matplotlib's Agg backend, so the player
works in JupyterLab, Jupyter Notebook and VS Code alike, without ipympl. Stepping redraws only what
changes: the timelines and the Gantt chart are drawn once and only their cursor lines are redrawn over
the kept pixels (``render.CursorPicture``); the block grid's cells, labels and title are redrawn over
its kept axes (``blockgrid.BlockGrid``), the queues and the lines are rewritten.
"""

from __future__ import annotations

import bisect
import html
import io
import re
import threading
import time
from typing import Any, Callable

import ipywidgets as widgets
from matplotlib.figure import Figure

from nanovllm_teach.i18n import LANGS, resolve_lang, say, speaking
from nanovllm_teach.trace.console import VERBOSITIES, ConsoleRenderer
from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.trace.recorder import TraceRecorder
from nanovllm_teach.trace.replay import EngineReplay, KVSnapshot, Queues, kv_snapshot, queues
from nanovllm_teach.trace.steps import cut_steps
from nanovllm_teach.trace.tables import StepRow
from nanovllm_teach.viz import words
from nanovllm_teach.viz.blockgrid import BlockGrid, cache_summary, freed_at_step_end, grid_layout, group_summary
from nanovllm_teach.viz.render import BlitPicture, CursorPicture, as_written
from nanovllm_teach.viz.report import plot_overview
from nanovllm_teach.viz.timeline import cursor_lines

# Where a TEACHING line may wrap: after the ", " between two stats (or list items) and before each " | ".
_FIELD_BREAK = re.compile(r"(?<=,) | (?=\| )")
# A followed run is redrawn at most this often (seconds): ten times a second.
FOLLOW_INTERVAL_S = 0.1
# Two columns when the widget is wide enough for both, one above the other when not.
_COLUMN = widgets.Layout(flex="1 1 430px", min_width="0")


class Player:
    """Step through ``trace``: ``set_step(n)``, the current ``lines`` / ``queues`` / ``kv``, and ``widget``.

    ``lang``: language of the TEACHING reasons ("en" or "zh"); ``verbosity``: as ``ConsoleRenderer``'s;
    ``dpi``: resolution of the pictures; ``interval_ms``: time between steps while playing.
    """

    @as_written
    def __init__(self, trace: Trace, lang: str | None = None, verbosity: str = "normal", dpi: float = 90,
                 interval_ms: int = 400) -> None:
        if not trace.steps:
            raise ValueError(f"trace {trace.path or '(in memory)'} has no completed engine step to play")
        lang = resolve_lang(lang)
        if verbosity not in VERBOSITIES:
            raise ValueError(f"verbosity must be one of {VERBOSITIES}, got {verbosity!r}")
        self._dpi = dpi
        self._lang, self._verbosity = lang, verbosity
        self._load(trace)
        first = self.steps[0]
        self.slider = widgets.IntSlider(value=first, min=first, max=self.steps[-1], continuous_update=False,
                                        layout=widgets.Layout(flex="1 1 300px", min_width="200px"))
        # Play's own buttons are play, pause (which keeps the step) and stop (back to the first step);
        # the two arrows step by hand.
        self.play = widgets.Play(value=first, min=first, max=self.steps[-1], interval=interval_ms)
        self.back = widgets.Button(description="◀", layout=widgets.Layout(width="40px"))
        self.forward = widgets.Button(description="▶", layout=widgets.Layout(width="40px"))
        self.back.on_click(lambda _: self._step_by(-1))
        self.forward.on_click(lambda _: self._step_by(+1))
        # A kernel-side link: the slider follows Play in any frontend, and in tests without one.
        widgets.link((self.play, "value"), (self.slider, "value"))
        self.lang_picker = widgets.Dropdown(options=list(LANGS), value=lang, layout=widgets.Layout(width="140px"))
        self.verbosity_picker = widgets.Dropdown(options=list(VERBOSITIES), value=verbosity,
                                                 layout=widgets.Layout(width="180px"))
        self.header = widgets.HTML()
        self.timeline_image = widgets.Image(format="png", layout=widgets.Layout(width="100%"))
        self.grid_image = widgets.Image(format="png", layout=widgets.Layout(width="100%"))
        self.queue_view = widgets.HTML()
        self.group_picker = widgets.BoundedIntText(value=0, min=0, max=0,
                                                   layout=widgets.Layout(width="200px", display="none"))
        self.group_view = widgets.HTML()
        self.lines_view = widgets.HTML(layout=widgets.Layout(max_height="360px", overflow="auto"))

        self.slider.observe(self._on_slider, names="value")
        self.lang_picker.observe(self._on_text_option, names="value")
        self.verbosity_picker.observe(self._on_text_option, names="value")
        self.group_picker.observe(self._on_group, names="value")
        self.widget = widgets.VBox([
            widgets.HBox([self.play, self.back, self.forward, self.slider, self.lang_picker, self.verbosity_picker],
                         layout=widgets.Layout(flex_flow="row wrap")),
            self.header,
            self.timeline_image,
            widgets.Box([
                widgets.VBox([self.queue_view, self.grid_image, widgets.HBox([self.group_picker, self.group_view])],
                             layout=_COLUMN),
                widgets.VBox([self.lines_view], layout=_COLUMN),
            ], layout=widgets.Layout(display="flex", flex_flow="row wrap", width="100%")),
        ], layout=widgets.Layout(width="100%"))
        self._step = first
        self._name_controls()
        self._show(first)
        self._follower: threading.Thread | None = None

    def _load(self, trace: Trace) -> None:
        """Everything drawn from the trace (not the controls): done at the start and for each new snapshot
        of a run being followed."""
        self.trace = trace
        self.replay = EngineReplay(trace)
        self._rows: dict[int, StepRow] = {row.step: row for row in trace.steps}
        self.steps: list[int] = [row.step for row in trace.steps]
        # Each step's lines are those of its events: from just after the previous step's STEP_DONE to its own.
        self._cut = cut_steps(trace.events)
        # The positions of the SCHEDULE_DECODE events, for the decode detail numbering.
        self._decode_positions = [pos for pos, e in enumerate(trace.events) if e.event == "SCHEDULE_DECODE"]
        first, dpi = self.steps[0], self._dpi

        # Timelines and Gantt chart in one figure: one column of axes, so one x axis and one cursor.
        overview = plot_overview(trace, cursor_step=first, panel_height=1.05, max_gantt_height=4.0)
        self._timelines = CursorPicture(overview, cursor_lines(overview), dpi)
        self._freed = freed_at_step_end(trace)
        # Fixed axes, no layout engine: the grid's axes never move, so their pixels can be kept.
        # The summary line goes to the HTML header rather than into the picture: text is slow to draw.
        # Sized to the grid's rows (the cache size is the same at every step): no empty band around it.
        layout = grid_layout(self.replay.kv_at(first))
        grid_width = 4.2  # inches of cells; the legend takes the right of the figure
        grid_height = max(2.0, grid_width * layout.num_rows / layout.columns + 0.2)  # the legend's height at least
        width = 7.6  # the cells, the row labels on their left and the legend on their right
        grid_figure = Figure(figsize=(width, grid_height))
        self._block_grid = BlockGrid(grid_figure.add_axes((0.75 / width, 0.1 / grid_height, grid_width / width,
                                                           (grid_height - 0.2) / grid_height)),
                                     animated=True, title=False)
        self._grid = BlitPicture(grid_figure, max(dpi, 80))
        self.selected_group: int | None = None

    # --- following a run as it is recorded ------------------------------------------------------------

    @classmethod
    def follow(cls, source: "TraceRecorder | Callable[[], Trace]", worker: threading.Thread,
               lang: str | None = None, verbosity: str = "normal", dpi: float = 90, timeout_s: float = 600.0) -> "Player":
        """A player that follows a run while ``worker`` (a started thread: ``generate``, a workload, a server)
        records it into ``source``: a ``TraceRecorder`` that keeps its events in memory, or a function that
        returns the run so far as a ``Trace`` (the server's ``LiveFeed.trace``). It shows the newest step, up
        to ten times a second; once ``worker`` ends it shows the whole run and steps like any player.
        Waits (at most ``timeout_s``) for the run's first step."""
        snapshot = _snapshots(source)
        deadline = time.monotonic() + timeout_s
        trace = snapshot()
        while not trace.steps:
            if not worker.is_alive() and not (trace := snapshot()).steps:
                raise ValueError("the run ended without completing an engine step: nothing to play")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no engine step was recorded within {timeout_s} s")
            time.sleep(FOLLOW_INTERVAL_S)
            trace = snapshot()
        player = cls(trace, lang, verbosity, dpi)
        player.set_step(player.steps[-1])
        player._follower = threading.Thread(target=player._follow, args=(snapshot, worker), name="player-follow",
                                            daemon=True)
        player._follower.start()
        return player

    @property
    def following(self) -> bool:
        """Whether the player is still following its run."""
        return self._follower is not None and self._follower.is_alive()

    def wait(self, timeout_s: float | None = None) -> None:
        """Wait until the followed run has ended and the player shows all of it."""
        if self._follower is not None:
            self._follower.join(timeout_s)

    def _follow(self, snapshot: "Callable[[], Trace]", worker: threading.Thread) -> None:
        shown = len(self.steps)
        while True:
            done = not worker.is_alive()  # read before the snapshot: a run that ended is then complete in it
            started = time.monotonic()
            trace = snapshot()
            if len(trace.steps) != shown:
                shown = len(trace.steps)
                self._show_snapshot(trace)
            if done:
                return
            time.sleep(max(FOLLOW_INTERVAL_S - (time.monotonic() - started), 0.0))

    @as_written
    def _show_snapshot(self, trace: Trace) -> None:
        self._load(trace)
        last = self.steps[-1]
        self.play.max = self.slider.max = last
        self._step = None  # whatever was shown, it is drawn anew
        self.set_step(last)

    # --- the programmatic API -----------------------------------------------------------------------

    @property
    def step(self) -> int:
        """The step shown."""
        return self._step

    def set_step(self, step: int) -> None:
        """Show ``step`` (a step the trace completed): its pictures, and the queues and blocks at its end."""
        if step not in self._rows:
            raise ValueError(f"step {step} is not a completed step of this trace "
                             f"(steps {self.steps[0]}..{self.steps[-1]})")
        self.slider.value = step  # the observer redraws
        if self._step != step:  # the slider already showed this value: nothing fired
            self._show(step)

    @property
    def lines(self) -> list[str]:
        """The TEACHING lines of the current step."""
        return self._lines

    @property
    def queues(self) -> Queues:
        """The queues at the end of the current step."""
        return self._queues

    @property
    def kv(self) -> KVSnapshot:
        """The KV cache at the end of the current step."""
        return self._kv

    @property
    def lang(self) -> str:
        return self._lang

    @property
    def verbosity(self) -> str:
        return self._verbosity

    def set_lang(self, lang: str) -> None:
        """Language of the TEACHING lines ("en" or "zh")."""
        self.lang_picker.value = lang

    @property
    def timeline_figure(self) -> Figure:
        """The timelines and the Gantt chart: one figure, one x axis."""
        return self._timelines.figure

    @property
    def grid_figure(self) -> Figure:
        return self._grid.figure

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        return self.widget._repr_mimebundle_(**kwargs)

    # --- what each step shows -------------------------------------------------------------------------

    def step_lines(self, step: int) -> list[str]:
        """The TEACHING lines of ``step`` in the current language and verbosity."""
        renderer = ConsoleRenderer(self._lang, io.StringIO(), self._verbosity)
        # The renderer numbers decode details ("decode detail #k/3") by counting the SCHEDULE_DECODE events
        # it has seen; show it the earlier ones first (past ``decode_details`` the exact count no longer
        # matters, so at most that many + 1).
        earlier = bisect.bisect_left(self._decode_positions, self._cut.spans[step].start)
        for pos in self._decode_positions[:min(earlier, renderer.decode_details + 1)]:
            renderer.lines(self.trace.events[pos])
        return [line for e in self._cut.events(self.trace.events, step) for line in renderer.lines(e)]

    def _on_slider(self, change: dict[str, Any]) -> None:
        value = change["new"]
        if value not in self._rows:  # a gap in the step numbers: snap back to the last recorded step
            self.slider.value = self.steps[max(0, bisect.bisect_right(self.steps, value) - 1)]
            return
        self._show(value)

    def _on_text_option(self, change: dict[str, Any]) -> None:
        self._lang, self._verbosity = self.lang_picker.value, self.verbosity_picker.value
        self._name_controls()
        self._show(self._step)

    def _name_controls(self) -> None:
        """The controls' names in the player's language."""
        with speaking(self._lang):
            for widget, text in ((self.slider, words.STEP), (self.play, words.PLAY), (self.lang_picker, words.LANGUAGE),
                                 (self.verbosity_picker, words.DETAIL), (self.group_picker, words.BLOCK_GROUP)):
                widget.description = say(text)
            self.back.tooltip, self.forward.tooltip = say(words.STEP_BACK), say(words.STEP_FORWARD)

    def _step_by(self, offset: int) -> None:
        """The step ``offset`` places before or after this one among the completed steps (held at the ends)."""
        here = self.steps.index(self._step)
        self.set_step(self.steps[min(max(here + offset, 0), len(self.steps) - 1)])

    def _show(self, step: int) -> None:
        self._step = step
        state = self.replay.state_at(step)
        self._queues = queues(state)
        self._kv = kv_snapshot(state, self.replay.num_blocks)
        self._lines = self.step_lines(step)

        self.timeline_image.value = self._timelines.png_at(step)
        self._draw_grid()
        row = self._rows[step]
        with speaking(self._lang):
            summary = cache_summary(self._kv, self._block_grid.layout, self._freed.get(step))
            header = say(words.STEP_HEADER, step=step, last=self.steps[-1], phase=say(words.PHASE[row.phase]),
                         batch=row.batch_size, tokens=row.num_batched_tokens or 0, ms=f"{row.latency_ms:.2f}")
            held = say(words.LABEL_VALUE, label=say(words.KV_BLOCKS_HELD), value=row.held_blocks)
            at_end = say(words.LABEL_VALUE, label=say(words.KV_BLOCKS_AT_STEP_END), value=summary)
            self.header.value = f"<b>{html.escape(header)}</b> · {html.escape(held)}<br>{html.escape(at_end)}"
            self.queue_view.value = self._queues_html()
        self.lines_view.value = self._lines_html()

    def select_group(self, cell: int) -> None:
        """Outline one cell of a grouped block grid and say what its blocks hold."""
        self.group_picker.value = cell  # the observer redraws

    def _on_group(self, change: dict[str, Any]) -> None:
        if change["new"] != self.selected_group:
            self.selected_group = change["new"]
            self._draw_grid()

    def _draw_grid(self) -> None:
        before = self._block_grid.layout
        layout = grid_layout(self._kv, self._block_grid.max_cells)
        grouped = layout.group > 1
        if grouped and self.selected_group is None:  # start on the group of the first used block
            self.selected_group = layout.cell(min(self._kv.holders, default=0))
        self._block_grid.update(self._kv, self._freed.get(self._step), self.selected_group if grouped else None)
        if layout != before:  # another layout: new ticks and legend to keep
            self._grid.capture()
            self.group_picker.max = max(layout.num_cells - 1, 0)
            self.group_picker.layout.display = "" if grouped else "none"
        if grouped:
            self.group_picker.value = self.selected_group
        self.grid_image.value = self._grid.png(self._block_grid.changing_artists())
        self.group_view.value = html.escape(group_summary(self._kv, layout, self.selected_group)) if grouped else ""

    def _queues_html(self) -> str:
        q = self._queues
        preempted = set(q.preempted)

        def ids(seq_ids: tuple[int, ...]) -> str:
            return ", ".join(f"<u>{sid}</u>" if sid in preempted else str(sid) for sid in seq_ids) or "—"
        def line(queue: str, seq_ids: tuple[int, ...]) -> str:
            return f"<b>{html.escape(say(words.QUEUE_HEAD, queue=queue, n=len(seq_ids)))}</b>{ids(seq_ids)}"
        waiting, running = line(say(words.QUEUE["waiting"]), q.waiting), line(say(words.QUEUE["running"]), q.running)
        finished = line(say(words.FINISHED_THIS_STEP), q.finished)
        return (f"<div>{waiting}" + (f"<small>{say(words.UNDERLINED_PREEMPTED)}</small>" if preempted else "")
                + f"<br>{running}<br>{finished}</div>")

    def _lines_html(self) -> str:
        if not self._lines:
            return f"<i>{say(words.NO_LINES_AT_DETAIL, self._lang)}</i>"
        return ('<div style="font-family:monospace; font-size:11px; line-height:1.3; white-space:normal">'
                + "".join(wrap_html(line) for line in self._lines) + "</div>")


def wrap_html(line: str) -> str:
    """One TEACHING line as HTML that a narrow view wraps between fields (after a stat's comma, before a
    " | "), never inside one, continuation lines indented."""
    # The reason is prose: it may wrap between its words. Every other field stays on one line.
    fields = "".join(f'<span style="white-space:{"normal" if part.startswith("| reason=") else "pre"}">'
                     f'{html.escape(part)}</span> ' for part in _FIELD_BREAK.split(line))
    return ('<div style="padding-left:2em; text-indent:-2em; word-break:normal; overflow-wrap:normal">'
            f'{fields}</div>')



def _snapshots(source: "TraceRecorder | Callable[[], Trace]") -> "Callable[[], Trace]":
    """A function returning the followed run so far, cut after its last completed step (a step being
    recorded right now is left for the next snapshot)."""
    if isinstance(source, TraceRecorder):
        if not source.keep_in_memory:
            raise ValueError("the recorder does not keep its events in memory (keep_in_memory=False): "
                             "a player cannot follow it")

        def from_recorder() -> Trace:
            trace = Trace.from_recorder(source)
            completed = cut_steps(trace.events).after.start
            return Trace(trace.header, trace.events[:completed], trace.path)
        return from_recorder
    if callable(source):
        return source
    raise TypeError(f"source must be a TraceRecorder or a function returning a Trace, not {type(source).__name__}")
