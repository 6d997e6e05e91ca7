"""The step-through player: a trace replayed in a notebook, one engine step at a time, by the replay page's
own viewer.

::

    from nanovllm_teach.trace import load_trace
    from nanovllm_teach.viz import Player
    player = Player(load_trace("traces/preemption.jsonl"))
    player            # the viewer, in the cell's output
    player.step = 12  # or click, scrub, press Play in it; player.step says where it is
    player.lines; player.queues; player.kv

``Player`` is an anywidget (the ecosystem's way to ship a widget's JavaScript inside a Python package): its
front end is the replay page's script and words (``page.viewer_script``, ``page_words``), started on the
widget's element by ``page_assets/widget.js``. The trace's data goes to the browser once, in the page's
compact encoding (``page.viewer_data``, gzip-compressed bytes); playing, stepping and scrubbing happen in
the browser at its own speed, with no kernel round trip per step. The TEACHING lines of a long trace are
sent a window of ``LINE_WINDOW`` steps at a time: the first with the data, the others when the viewer
reaches them (the viewer asks, the kernel answers). The step shown is the ``step`` trait, synced both ways
(at most four times a second while playing), and so is ``lang``.

Where widgets do not render (GitHub's notebook view, a PDF export), the cell shows the static picture that
``_repr_mimebundle_`` adds: the timelines and the Gantt chart with the cursor at the step shown. Tested in
JupyterLab (headless Chromium); VS Code and Colab render anywidgets by anywidget's standard, untested here.

Part of the torch-free viz layer: the data is ``page``'s, the Python-side answers (``lines``, ``queues``,
``kv``) are the trace layer's replay and console.
"""

from __future__ import annotations

import bisect
import json
import threading
import time
from typing import Any, Callable

import anywidget
import traitlets

from nanovllm_teach.i18n import LANGS, resolve_lang, say
from nanovllm_teach.trace.console import VERBOSITIES
from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.trace.recorder import TraceRecorder
from nanovllm_teach.trace.replay import EngineReplay, KVSnapshot, Queues, kv_snapshot, queues
from nanovllm_teach.trace.steps import cut_steps
from nanovllm_teach.viz.messages import (BAD_LANG, BAD_SOURCE, BAD_VERBOSITY, IN_MEMORY, NO_STEP_IN_TIME, NO_STEP_TO_PLAY,
                                         NOT_A_COMPLETED_STEP, RECORDER_NOT_IN_MEMORY, RUN_ENDED_WITHOUT_A_STEP)
from nanovllm_teach.viz.page import packed_bytes, primed_renderers, step_lines_window, viewer_asset, viewer_data, \
    viewer_markup, viewer_script, viewer_style
from nanovllm_teach.viz.render import figure_png
from nanovllm_teach.viz.report import plot_overview

# A followed run's data is sent again at most this often (seconds): encoding it takes a while on a long run.
FOLLOW_INTERVAL_S = 1.0
# The TEACHING lines go to the browser this many steps at a time.
LINE_WINDOW = 2000


def _module() -> str:
    """The widget's JavaScript module: the viewer, its markup, and widget.js's ``render``."""
    return (f"{viewer_script()}\nconst MARKUP = {json.dumps(viewer_markup())};\n{viewer_asset('widget.js')}")


class Player(anywidget.AnyWidget):
    """Step through ``trace`` in a notebook: ``step`` (read it, or set it to a completed step), the current
    ``lines`` / ``queues`` / ``kv``.

    ``lang``: the viewer's language ("en" or "zh"; None: the chosen one); ``verbosity``: the TEACHING lines',
    as ``ConsoleRenderer``'s.
    """

    _esm = _module()
    _css = viewer_style()
    data = traitlets.Bytes().tag(sync=True)
    step = traitlets.Int().tag(sync=True)
    lang = traitlets.Unicode("en").tag(sync=True)

    def __init__(self, trace: Trace, lang: str | None = None, verbosity: str = "normal") -> None:
        if not trace.steps:
            raise ValueError(say(NO_STEP_TO_PLAY, path=trace.path or say(IN_MEMORY)))
        if verbosity not in VERBOSITIES:
            raise ValueError(say(BAD_VERBOSITY, choices=VERBOSITIES, value=verbosity))
        self._verbosity = verbosity
        self._follower: threading.Thread | None = None
        self._load(trace)
        lang = resolve_lang(lang)
        super().__init__(data=self._data(lang), step=self.steps[0], lang=lang)
        self.on_msg(self._on_msg)

    def _load(self, trace: Trace) -> None:
        """What the Python side answers from: done at the start and for each new snapshot of a followed run."""
        self.trace = trace
        self.replay = EngineReplay(trace)
        self.steps: list[int] = [row.step for row in trace.steps]
        self._completed = set(self.steps)
        self._cut = cut_steps(trace.events)

    def _data(self, lang: str, live: bool = False) -> bytes:
        """The viewer's data, the lines of the first ``LINE_WINDOW`` steps in it."""
        data = viewer_data(self.trace, lang, self._verbosity, live, lines_until=LINE_WINDOW)
        return packed_bytes(data)

    def _on_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        """The viewer asks for the lines of the window holding step index ``content["lines"]``."""
        if not isinstance(content, dict) or not isinstance(content.get("lines"), int):
            return
        first = content["lines"] // LINE_WINDOW * LINE_WINDOW
        if 0 <= first < len(self.steps):
            self.send({"lines": step_lines_window(self.trace, self._verbosity, first, first + LINE_WINDOW)})

    @traitlets.validate("step")
    def _valid_step(self, proposal: dict[str, Any]) -> int:
        step = proposal["value"]
        if step not in self._completed:
            raise traitlets.TraitError(say(NOT_A_COMPLETED_STEP, step=step, first=self.steps[0], last=self.steps[-1]))
        return step

    @traitlets.validate("lang")
    def _valid_lang(self, proposal: dict[str, Any]) -> str:
        if proposal["value"] not in LANGS:
            raise traitlets.TraitError(say(BAD_LANG, choices=LANGS, value=proposal["value"]))
        return proposal["value"]

    # --- following a run as it is recorded ------------------------------------------------------------

    @classmethod
    def follow(cls, source: "TraceRecorder | Callable[[], Trace]", worker: threading.Thread,
               lang: str | None = None, verbosity: str = "normal", timeout_s: float = 600.0) -> "Player":
        """A player that follows a run while ``worker`` (a started thread: ``generate``, a workload, a server)
        records it into ``source``: a ``TraceRecorder`` that keeps its events in memory, or a function that
        returns the run so far as a ``Trace`` (the server's ``LiveFeed.trace``). It shows the newest step, the
        run's data sent again at most once a second; once ``worker`` ends it shows the whole run and steps
        like any player. Waits (at most ``timeout_s``) for the run's first step."""
        snapshot = _snapshots(source)
        deadline = time.monotonic() + timeout_s
        trace = snapshot()
        while not trace.steps:
            if not worker.is_alive() and not (trace := snapshot()).steps:
                raise ValueError(say(RUN_ENDED_WITHOUT_A_STEP))
            if time.monotonic() > deadline:
                raise TimeoutError(say(NO_STEP_IN_TIME, timeout_s=timeout_s))
            time.sleep(0.1)
            trace = snapshot()
        player = cls(trace, lang, verbosity)
        player.step = player.steps[-1]
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
                self._load(trace)
                with self.hold_sync():  # one message: the new data and its last step
                    self.data = self._data(self.lang, live=not done)
                    self.step = self.steps[-1]
            if done:
                return
            time.sleep(max(FOLLOW_INTERVAL_S - (time.monotonic() - started), 0.0))

    # --- the programmatic API -----------------------------------------------------------------------

    @property
    def last(self) -> int:
        """The trace's last completed step."""
        return self.steps[-1]

    def set_step(self, step: int) -> None:
        """Show ``step`` (a step the trace completed); ``player.step = step`` does the same."""
        if step not in self._completed:
            raise ValueError(say(NOT_A_COMPLETED_STEP, step=step, first=self.steps[0], last=self.steps[-1]))
        self.step = step

    def step_by(self, offset: int) -> None:
        """Show the step ``offset`` places before or after this one among the completed steps (held at the ends)."""
        here = bisect.bisect_left(self.steps, self.step)
        self.step = self.steps[min(max(here + offset, 0), len(self.steps) - 1)]

    def set_lang(self, lang: str) -> None:
        """The viewer's language ("en" or "zh"); ``player.lang = lang`` does the same."""
        self.lang = lang

    @property
    def verbosity(self) -> str:
        return self._verbosity

    @property
    def lines(self) -> list[str]:
        """The TEACHING lines of the current step, in the player's language."""
        return self.step_lines(self.step)

    @property
    def queues(self) -> Queues:
        """The queues at the end of the current step."""
        return queues(self.replay.state_at(self.step))

    @property
    def kv(self) -> KVSnapshot:
        """The KV cache at the end of the current step."""
        return kv_snapshot(self.replay.state_at(self.step), self.replay.num_blocks)

    def step_lines(self, step: int) -> list[str]:
        """The TEACHING lines of ``step`` in the player's language and verbosity: the page's, rendered alike."""
        renderer = primed_renderers(self.trace, self._verbosity, self._cut.spans[step].start)[self.lang]
        return [line for e in self._cut.events(self.trace.events, step) for line in renderer.lines(e)]

    def picture(self) -> bytes:
        """The static picture: the timelines and the Gantt chart, the cursor at the step shown (PNG bytes)."""
        return figure_png(plot_overview(self.trace, cursor_step=self.step), dpi=72)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        # The widget for a live frontend; the picture for those without one (GitHub's view, nbconvert to PDF),
        # which skip the widget's mime type and show the best one they know.
        bundle = super()._repr_mimebundle_(**kwargs)
        if isinstance(bundle, tuple):  # (data, metadata)
            bundle[0]["image/png"] = self.picture()
        elif bundle is not None:
            bundle["image/png"] = self.picture()
        return bundle


def _snapshots(source: "TraceRecorder | Callable[[], Trace]") -> "Callable[[], Trace]":
    """A function returning the followed run so far, cut after its last completed step (a step being
    recorded right now is left for the next snapshot)."""
    if isinstance(source, TraceRecorder):
        if not source.keep_in_memory:
            raise ValueError(say(RECORDER_NOT_IN_MEMORY))

        def from_recorder() -> Trace:
            trace = Trace.from_recorder(source)
            completed = cut_steps(trace.events).after.start
            return Trace(trace.header, trace.events[:completed], trace.path)
        return from_recorder
    if callable(source):
        return source
    raise TypeError(say(BAD_SOURCE, kind=type(source).__name__))
