"""Serving: the HTTP edge, where a hostile client is held to its bounds before any route runs.

- ``uvicorn_config(app, host, port, limits)``: the uvicorn settings every server here runs under (the
  ``serve`` command, ``BackgroundServer``): idle keep-alive connections closed after
  ``limits.keep_alive_s`` (uvicorn's ``timeout_keep_alive``), and a request whose headers have not all
  arrived ``limits.header_timeout_s`` after its first byte (or after the connection opened) closed
  (``HeaderTimeoutProtocol``). Why a protocol of our own: uvicorn bounds only the idle time between
  requests, so a slowloris client (a byte of headers now and then) holds a connection, and a socket, for
  ever; the headers are parsed before any ASGI app sees the request, so no middleware can bound them. On
  SIGTERM, the drain: no new connection, the requests under way given ``limits.drain_s`` to finish, then
  cancelled (uvicorn's ``timeout_graceful_shutdown``; a cancelled response aborts its request).
- ``read_body(request, limits)``: the body, bounded in size (413) and in time (``limits.body_timeout_s``,
  408); a client that leaves mid-body is logged in one line (``ClientGone``), not as an ERROR traceback.
- ``RequireApiKey`` (``app.add_middleware(RequireApiKey, key=...)``), as ``vllm serve --api-key``: every
  ``/v1`` route wants ``Authorization: Bearer KEY`` (401 otherwise); so do the live page's routes
  (``/live``, ``/live/page``, ``/live/events``: they show every request's prompt length and timing), which
  also take the key as ``?key=KEY``, since a browser opening a page or an ``EventSource`` sends no header of
  its own (the live page passes on the key it was opened with); ``/health`` and ``/metrics`` stay open, as
  vLLM leaves its health and metrics routes open.

Emits no events.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
from typing import Any
from urllib.parse import parse_qs

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.requests import ClientDisconnect
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from nanovllm_teach.serve.limits import ServeLimits
from nanovllm_teach.i18n import say
from nanovllm_teach.serve.protocol import BODY_OVER_LIMIT, BODY_TOO_LARGE, BODY_TOO_SLOW, ApiError

log = logging.getLogger(__name__)


class ClientGone(Exception):
    """The client closed its connection before its body had all arrived: nobody is left to answer."""


class HeaderTimeoutProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, closing a connection whose request headers take longer than
    ``header_timeout_s`` from the request's first byte (or from the connection's opening)."""

    def __init__(self, *args: Any, header_timeout_s: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout_s = header_timeout_s
        self._headers_deadline: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        self._disarm()
        self._headers_deadline = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._headers_deadline is not None:
            self._headers_deadline.cancel()
            self._headers_deadline = None

    def _headers_too_slow(self) -> None:
        self._headers_deadline = None
        log.info("closed a connection from %s: its request headers took more than %s s", self.client,
                 self.header_timeout_s)
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm()  # a kept-alive connection's next request: its headers are timed from their first byte

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()


def uvicorn_config(app: FastAPI, host: str, port: int, limits: ServeLimits) -> uvicorn.Config:
    """The uvicorn settings of a server bounded by ``limits`` (its timeouts and its drain)."""
    protocol = functools.partial(HeaderTimeoutProtocol, header_timeout_s=limits.header_timeout_s)
    return uvicorn.Config(app, host=host, port=port, log_level="warning", http=protocol,
                          timeout_keep_alive=limits.keep_alive_s, timeout_graceful_shutdown=limits.drain_s)


async def read_body(request: Request, limits: ServeLimits) -> bytes:
    """The request's body: an ``ApiError`` past ``limits.max_body_bytes`` (413) or ``limits.body_timeout_s``
    (408), ``ClientGone`` if the client closed the connection first."""
    declared = request.headers.get("content-length")
    size_limit = limits.max_body_bytes
    if declared is not None and declared.isdigit() and int(declared) > size_limit:
        raise ApiError(413, say(BODY_TOO_LARGE, size=declared, limit=size_limit))
    chunks, size = [], 0
    try:
        async with asyncio.timeout(limits.body_timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > size_limit:
                    raise ApiError(413, say(BODY_OVER_LIMIT, limit=size_limit))
                chunks.append(chunk)
    except TimeoutError:
        raise ApiError(408, say(BODY_TOO_SLOW, timeout_s=limits.body_timeout_s),
                       headers={"Connection": "close"}) from None
    except ClientDisconnect:
        raise ClientGone(f"{request.client}: left after {size} bytes of its body") from None
    return b"".join(chunks)


def add_client_gone_handler(app: FastAPI) -> None:
    """A client that left mid-body: one line in the log (at INFO: it is the client's doing, not a fault)."""

    @app.exception_handler(ClientGone)
    async def client_gone(request: Request, error: ClientGone) -> Response:
        log.info("abandoned request %s %s: %s", request.method, request.url.path, error)
        return Response(status_code=499)  # nobody reads it: the connection is gone


class RequireApiKey:
    """ASGI middleware: every ``/v1`` and ``/live`` route answers 401 unless the request carries
    ``Authorization: Bearer key`` (a ``/live`` route: or ``?key=key``). Pure ASGI, not ``BaseHTTPMiddleware``,
    so that streamed responses and the disconnect a route listens for pass through untouched."""

    def __init__(self, app: Any, key: str) -> None:
        self.app = app
        self.key = key.encode()
        self.expected = b"Bearer " + self.key

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith(("/v1", "/live")):
            if not self._allowed(scope):
                await JSONResponse({"error": "Unauthorized"}, status_code=401)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _allowed(self, scope: dict[str, Any]) -> bool:
        # Constant-time comparisons: no key guessed byte by byte.
        if secrets.compare_digest(dict(scope["headers"]).get(b"authorization", b""), self.expected):
            return True
        if not scope["path"].startswith("/live"):
            return False
        given = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("key", [""])[-1]
        return secrets.compare_digest(given.encode("utf-8", "surrogateescape"), self.key)
