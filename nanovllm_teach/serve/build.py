"""Serving: one call that builds a whole server (the engine-core process, the app) from settings.

``build_server(model, trace=..., live=..., **settings)`` is what ``nanovllm-teach serve``, the tests, the
benchmark and notebook 15 call: it starts the engine core (``serve/core_client.py``), which builds the
engine in its own process, and returns the app of this, the API process; ``BackgroundServer(app)`` serves
it from a thread of the calling process (the tests, the benchmark, the notebook). The engine records only
when asked: to ``trace`` (a JSONL file the engine core writes, with real arrival times) and/or to the live
page's feed (``live``, here, fed with the core's events).

Orchestration; this process never imports torch for the engine (the engine core does).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.serve.app import create_app
from nanovllm_teach.serve.core_client import EngineCoreClient
from nanovllm_teach.serve.http import uvicorn_config
from nanovllm_teach.serve.limits import ServeLimits

NOT_LISTENING = Text(en="the server did not start on {host}:{port} within {timeout_s} s",
                     zh="服务器没有在 {timeout_s} 秒内在 {host}:{port} 上启动")


def build_server(model: str | Path | None = None, *, trace: str | Path | None = None,
                 served_model_name: str | None = None, live: bool = True, limits: ServeLimits | None = None,
                 api_key: str | None = None, **settings: Any) -> FastAPI:
    """An app serving ``model`` (None: the shipped one), bounded by ``limits`` (None: the defaults), asking
    ``api_key`` of every ``/v1`` and ``/live`` route (None: open); the engine core starts here (a bad
    setting or model: ``ValueError``), and is shut down when the app's event loop stops."""
    limits = limits or ServeLimits()
    core = EngineCoreClient.start(model, trace=trace, live=live, settings=settings, meanwhile=_import_tokenizer)
    try:
        from transformers import AutoTokenizer  # loaded by ``_import_tokenizer`` while the core started

        feed = None
        if live:
            from nanovllm_teach.serve.live import LiveFeed
            feed = LiveFeed()
            feed.start(core.ready.trace_header)
        tokenizer = AutoTokenizer.from_pretrained(core.ready.model)  # the API process's own
        name = served_model_name or Path(core.ready.model).name
        return create_app(core, model_name=name, tokenizer=tokenizer, limits=limits, live=feed, api_key=api_key)
    except BaseException:
        core.stop()
        raise


def _import_tokenizer() -> None:
    """The API process's slowest import (``transformers`` brings torch with it: seconds on a busy laptop), run
    while the engine core loads its own torch and model, so that the two start side by side."""
    from transformers import AutoTokenizer  # noqa: F401


class BackgroundServer:
    """``app`` served by uvicorn on a thread of this process (a notebook, a test, a benchmark): ``url`` is
    ``http://HOST:PORT`` (``port=0``: a free port); ``stop()`` (or leaving the ``with`` block) shuts it down,
    which shuts the engine core down (its engine and trace closed)."""

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int = 0, start_timeout_s: float = 60.0) -> None:
        import uvicorn

        self.app = app
        self._server = uvicorn.Server(uvicorn_config(app, host, port, app.state.server.limits))
        self._thread = threading.Thread(target=self._server.run, name="uvicorn", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + start_timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self._server.should_exit = True
                raise RuntimeError(say(NOT_LISTENING, host=host, port=port, timeout_s=start_timeout_s))
            time.sleep(0.02)
        bound_host, bound_port = self._server.servers[0].sockets[0].getsockname()[:2]
        self.url = f"http://{bound_host}:{bound_port}"

    @property
    def feed(self) -> Any:
        """The live feed (``serve/live.py``), or None if the server was built with ``live=False``."""
        return self.app.state.live

    def stop(self, timeout_s: float = 60.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout_s)

    def __enter__(self) -> "BackgroundServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
