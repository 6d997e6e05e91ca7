"""Serving: the replay page in live mode, fed from the engine's recorder while the server runs.

``LiveFeed`` takes the engine's teaching events as the engine core sends them (``serve/core_client.py``
calls it on the event loop with each step's events, so it only keeps each event and counts the steps:
nothing slow happens there). Mounted on the app it serves:

- ``GET /live``: a small page (``viz/page_assets/live.html``) with a ticker and the replay page of the run
  so far in a frame, replaced by a newer one as steps complete (at most once a second, and only once the
  previous one has loaded) while "follow" is on: its timelines, queues, Gantt chart and KV grid move as
  requests arrive; a learner who steps back by hand turns "follow" off and stays where they are;
- ``GET /live/events``: Server-Sent Events, one ``step`` message (the last STEP_DONE's numbers) whenever
  steps have completed since the last message, looked at ten times a second;
- ``GET /live/page``: the replay page (``viz/page.py``) of the events so far, opening at the newest step.

Bounded, whoever asks: the feed keeps at most ``MAX_EVENTS`` events (beyond them the page stops growing and
says how far it goes); at most ``MAX_SUBSCRIBERS`` clients follow ``/live/events`` at once (503 with
``Retry-After`` beyond them); the page is built on a worker thread, one at a time, and at most once per
``PAGE_INTERVAL_S`` for every client together (per language): the others get the page last built.

Emits no events (it reads them).
"""

from __future__ import annotations

import asyncio
import html
import threading
import time
from importlib import resources
from typing import Any, AsyncIterator

import msgspec
from fastapi import FastAPI, Query
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse

from nanovllm_teach.i18n import LANGS, resolve_lang, say
from nanovllm_teach.serve.protocol import TOO_MANY_FOLLOWERS, ApiError
from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.trace.schema import TraceEvent
from nanovllm_teach.viz.page import replay_page
from nanovllm_teach.viz.page_words import live_words

# The feed keeps its events in the API process for the whole run: ~1.1 kB each in memory (a record and its
# dict, measured on 32 requests decoding together), so 10,000 are ~11 MB, where 200,000 were ~100-230 MB (a
# soak run's RSS grew by ~100 MB before reaching that cap). 10,000 events are some hundreds of steps of a busy
# server, more than a learner steps through by hand, and the page built from them stays a few MB.
MAX_EVENTS = 10_000
POLL_S = 0.1  # the events stream looks for new steps ten times a second
MAX_SUBSCRIBERS = 16  # clients following /live/events at once: a few learners, not a crowd
PAGE_INTERVAL_S = 1.0  # the live page is rebuilt at most this often, whoever asks


class LiveFeed:
    def __init__(self, max_events: int = MAX_EVENTS, max_subscribers: int = MAX_SUBSCRIBERS) -> None:
        self.max_events, self.max_subscribers = max_events, max_subscribers
        self.subscribers = 0  # touched only on the event loop's thread
        self.header: dict[str, Any] | None = None
        self.events: list[TraceEvent] = []
        self.num_steps = 0  # STEP_DONE events seen (kept or not)
        self.last_step: dict[str, Any] | None = None
        self.full = False
        self._complete = 0  # events up to the last kept STEP_DONE: a trace of whole steps
        self._page_lock = threading.Lock()
        self._pages: dict[str | None, tuple[float, int, str]] = {}  # lang -> (built at, num_steps then, page)
        self.pages_built = 0

    def start(self, header: dict[str, Any] | None) -> None:
        self.header = dict(header or {})

    def __call__(self, event: TraceEvent) -> None:
        """One event the engine recorded (on the event loop, for every event the core sends)."""
        if len(self.events) < self.max_events:
            self.events.append(event)
        else:
            self.full = True
        if event.event == "STEP_DONE":
            if not self.full:
                self._complete = len(self.events)
            stats = event.stats
            self.last_step = {"step": event.step, "batch": stats["batch_size"], "waiting": stats["waiting_len"],
                              "running": stats["running_len"], "used": stats["used_blocks"],
                              "free": stats["free_blocks"], "kept": not self.full}
            self.num_steps += 1

    def trace(self) -> Trace:
        """The run so far as a trace (a copy: the engine goes on recording)."""
        events = [TraceEvent(e.i, e.t_ns, e.event, e.phase, e.step, e.reason, e.stats)
                  for e in self.events[:self._complete]]
        return Trace(dict(self.header or {}), events)

    def page(self, lang: str | None) -> str | None:
        """The replay page of the run so far (None before the first step): the one built last if it is
        younger than ``PAGE_INTERVAL_S`` or no step has completed since."""
        if self.num_steps == 0:
            return None
        with self._page_lock:
            num_steps, now = self.num_steps, time.monotonic()
            built = self._pages.get(lang)
            if built is not None and (now - built[0] < PAGE_INTERVAL_S or built[1] == num_steps):
                return built[2]
            page = replay_page(self.trace(), lang, live=True)
            self._pages[lang] = (now, num_steps, page)
            self.pages_built += 1
            return page

    async def steps(self) -> AsyncIterator[bytes]:
        seen = -1
        while True:
            if self.num_steps != seen and self.last_step is not None:
                seen = self.num_steps
                yield b"event: step\ndata: " + msgspec.json.encode(self.last_step) + b"\n\n"
            await asyncio.sleep(POLL_S)

    def mount(self, app: FastAPI) -> None:
        @app.get("/live")
        async def live(lang: str | None = Query(default=None)) -> HTMLResponse:
            chosen = resolve_lang(lang if lang in LANGS else None)
            text = resources.files("nanovllm_teach.viz").joinpath("page_assets", "live.html").read_text("utf-8")
            # The words as JSON inside a script element: "<" written as \u003c, so no text can close it.
            words = msgspec.json.encode(live_words()).decode().replace("<", "\\u003c")
            return HTMLResponse(text.replace("{{lang}}", html.escape(chosen)).replace("{{words}}", words))

        @app.get("/live/events")
        async def live_events() -> Response:
            if self.subscribers >= self.max_subscribers:
                error = ApiError(503, say(TOO_MANY_FOLLOWERS, count=self.max_subscribers))
                return JSONResponse(error.body(), status_code=503, headers={"Retry-After": "5"})
            return _Subscription(self)

        @app.get("/live/page")
        async def live_page(lang: str | None = Query(default=None)) -> Response:
            page = await asyncio.to_thread(self.page, lang if lang in LANGS else None)
            if page is None:
                return Response(status_code=204)
            return HTMLResponse(page)


class _Subscription(StreamingResponse):
    """One client's ``/live/events``: counted in ``feed.subscribers`` from its making until it ends, however
    it ends (the client gone, the server stopping)."""

    def __init__(self, feed: LiveFeed) -> None:
        super().__init__(feed.steps(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        self.feed = feed
        feed.subscribers += 1

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.feed.subscribers -= 1
