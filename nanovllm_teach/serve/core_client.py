"""Serving (the API process's side): the engine core in a process of its own, driven over ZMQ, as vLLM v1's
``AsyncMPClient`` drives its ``EngineCoreProc``.

Why a process and not a thread: the engine's step is native code that lets go of the GIL, but each step
also costs Python (the scheduler, the sampler's bookkeeping), and so does every streamed token on the HTTP
side (parsing, detokenizing, one SSE chunk per token). In one process the two take turns on one GIL, and
the engine waits for the HTTP side between its steps; in two, each has its own interpreter and the engine
steps while the HTTP side frames the last step's tokens (notebook 15 measures both sides' CPU time per
streamed token).

``EngineCoreClient.start(model, trace=..., live=..., **settings)`` binds two ZMQ sockets on ``ipc://`` paths
in a private temporary folder (PUSH for commands, PULL for outputs), starts ``python -m
nanovllm_teach.serve.engine_core`` and waits for its ``Ready`` (or its ``Failed``: a bad setting or model
raises ``ValueError`` here, before the server listens). Then, on the server's event loop, ``run()`` reads
the core's outputs: each request's updates go to the callback its response registered (``submit``), the
numbers to ``ServerMetrics``, the teaching events to the live feed. If the core process dies (it said
``Failed``, or it exited), ``failure`` says why and every request still waiting is answered with it: the
routes then answer 503 at once, and ``/health`` 503. ``end()`` (or ``stop()``) sends ``Shutdown`` (the core aborts what
is left and closes the engine and its trace) and waits for the process to exit, killing it after
``STOP_TIMEOUT_S``.

Emits nothing itself.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import msgspec
import zmq
import zmq.asyncio

import nanovllm_teach
from nanovllm_teach.i18n import ENV_VAR, Text, resolve_lang, say
from nanovllm_teach.serve.messages import (Abort, CoreSpec, Failed, FromCore, Ready, Shutdown, StepOutput, Submit,
                                           ToCore, Update)
from nanovllm_teach.serve.metrics import ServerMetrics

START_TIMEOUT_S = 300.0  # loading torch and the model on a busy laptop takes tens of seconds
STOP_TIMEOUT_S = 30.0  # the core closes its engine and trace within this long of Shutdown, or is killed
WATCH_S = 0.5  # how often the reader looks whether the core process is still alive when no output comes

CORE_EXITED = Text(en="the engine core exited with status {status} before it was ready",
                   zh="引擎核心进程在就绪之前就退出了，退出状态 {status}")
CORE_NOT_READY = Text(en="the engine core was not ready within {timeout_s} s", zh="引擎核心进程没有在 {timeout_s} 秒内就绪")

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(FromCore)


class EngineCoreClient:
    def __init__(self, process: subprocess.Popen, context: zmq.Context, folder: str, ready: Ready) -> None:
        self.process, self.ready, self._folder = process, ready, folder
        self._context = context
        self._to_core: Any = None
        self._from_core: Any = None
        self._reading: Any = None
        self._sending: Any = None
        self._routes: dict[int, Callable[[Update], None]] = {}  # request id -> its response's callback
        self._admitted: set[int] = set()  # routed requests the core has queued
        self.metrics: ServerMetrics | None = None
        self.feed: Any = None  # a ``LiveFeed`` (``serve/live.py``), given the teaching events; None: none
        self._failure: str | None = None
        self._reader: asyncio.Task | None = None
        self._stopped = False

    @classmethod
    def start(cls, model: str | Path | None, *, trace: str | Path | None, live: bool, settings: dict[str, Any],
              meanwhile: Callable[[], object] | None = None) -> "EngineCoreClient":
        """The engine core started and ready (``ValueError`` naming what it refused, if it would not start).
        ``meanwhile`` runs here once the core's process is started, before waiting for it: this process's own
        slow start-up (its imports) then overlaps the core's."""
        folder = tempfile.mkdtemp(prefix="nanovllm-serve-")  # mode 0700: no other user reaches the sockets
        context = zmq.asyncio.Context()
        inputs, outputs = f"ipc://{folder}/inputs", f"ipc://{folder}/outputs"
        to_core, from_core = context.socket(zmq.PUSH), context.socket(zmq.PULL)
        to_core.setsockopt(zmq.SNDHWM, 0)  # never blocks the loop: what is queued is bounded by ``capacity``
        to_core.bind(inputs)
        from_core.bind(outputs)
        spec = CoreSpec(inputs, outputs, None if model is None else str(model), settings,
                        None if trace is None else str(trace), live)
        env = dict(os.environ)
        # The core refuses a request (a prompt too long, a bad token id) in its own words: the server's language.
        env[ENV_VAR] = resolve_lang()
        # The core imports this very package, wherever it was imported from here (a worktree, a notebook's path).
        root = str(Path(nanovllm_teach.__file__).resolve().parents[1])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        process = subprocess.Popen([sys.executable, "-m", "nanovllm_teach.serve.engine_core",
                                    msgspec.json.encode(spec, enc_hook=str).decode()], env=env)
        try:
            if meanwhile is not None:
                meanwhile()
            ready = _first_message(from_core, process)
        except BaseException:
            _end(process)
            to_core.close(linger=0)
            from_core.close(linger=0)
            context.term()
            shutil.rmtree(folder, ignore_errors=True)
            raise
        client = cls(process, context, folder, ready)
        client._to_core, client._from_core = to_core, from_core
        # Plain (not asyncio) views of the same sockets: non-blocking sends, and reads of what poll saw.
        client._sending = zmq.Socket.shadow(to_core.underlying)
        client._reading = zmq.Socket.shadow(from_core.underlying)
        return client

    # ---- what the routes call (on the event loop) ----------------------------------------------------

    @property
    def failure(self) -> str | None:
        """Why the engine core can no longer serve (None while it serves)."""
        return self._failure

    def submit(self, submit: Submit, deliver: Callable[[Update], None]) -> None:
        """Send ``submit``; its updates go to ``deliver`` until ``forget`` (a failure already known: at once)."""
        self._routes[submit.request_id] = deliver
        self._send(submit)

    def abort(self, request_ids: list[int]) -> None:
        self._send(Abort(request_ids))

    def forget(self, request_ids: list[int]) -> None:
        """No more updates for these requests (their response has ended)."""
        for request_id in request_ids:
            self._routes.pop(request_id, None)
            self._admitted.discard(request_id)

    def _send(self, command: ToCore) -> None:
        if self._failure is not None:
            return
        try:
            self._sending.send(_encoder.encode(command), zmq.NOBLOCK, copy=False)
        except zmq.Again:  # the core's end is gone (it died): the reader is about to say so, and answer everyone
            pass

    # ---- the reader (a task on the event loop) ---------------------------------------------------------

    def begin(self) -> None:
        """Start reading the core's outputs on the running event loop."""
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        while True:
            if not await self._from_core.poll(WATCH_S * 1000):
                if self.process.poll() is not None:
                    self._fail(f"the engine stopped: its process exited with status {self.process.returncode}")
                    return
                continue
            while True:  # all that has come, in one pass
                try:
                    frame = self._reading.recv(zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    break
                message = _decoder.decode(frame.buffer)
                if isinstance(message, Failed):
                    self._fail(message.reason)
                    return
                if isinstance(message, StepOutput):
                    self._apply(message)

    def _apply(self, out: StepOutput) -> None:
        for update in out.updates:
            deliver = self._routes.get(update.request_id)
            if deliver is None:  # its response has ended (a client that left): nobody is listening
                continue
            if update.accepted:
                self._admitted.add(update.request_id)
            deliver(update)
        metrics = self.metrics
        if out.stats is not None:
            metrics.stepped(out.stats)
        for ttft_s, num_prompt_tokens, num_cached in out.first_tokens:
            metrics.first_token(ttft_s, num_prompt_tokens, num_cached)
        for count, since_last_s in out.tokens:
            metrics.tokens(count, since_last_s)
        for done in out.finished:
            metrics.finished(done)
        for _ in range(out.aborted):
            metrics.aborted()
        if self.feed is not None:
            for event in out.events:
                self.feed(event)

    def _fail(self, reason: str) -> None:
        """The core is gone: every request still routed gets ``reason`` (refused if it was never queued)."""
        if self._failure is None:
            self._failure = reason
        for request_id, deliver in list(self._routes.items()):
            deliver(Update(request_id, error=reason, refused=request_id not in self._admitted))
        self._routes.clear()
        self._admitted.clear()

    # ---- the end --------------------------------------------------------------------------------------

    async def end(self) -> None:
        """On the event loop, as it stops: no more reading, then ``stop`` on a worker thread."""
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        await asyncio.to_thread(self.stop)

    def stop(self) -> None:
        """Shut the core down (its engine and trace closed), then the sockets (blocking; idempotent)."""
        if self._stopped:
            return
        self._stopped = True
        if self.process.poll() is None:
            try:
                self._sending.send(_encoder.encode(Shutdown()), zmq.NOBLOCK)
                self.process.wait(STOP_TIMEOUT_S)
            except (zmq.Again, subprocess.TimeoutExpired):
                _end(self.process)
        self._to_core.close(linger=0)
        self._from_core.close(linger=0)
        self._context.term()
        shutil.rmtree(self._folder, ignore_errors=True)


def _first_message(from_core: Any, process: subprocess.Popen) -> Ready:
    """Wait for the core's ``Ready`` (blocking: the server does not listen before its engine is there)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    socket = zmq.Socket.shadow(from_core.underlying)  # the same socket, blocking: no event loop runs yet
    while time.monotonic() < deadline:
        if socket.poll(WATCH_S * 1000):
            message = _decoder.decode(socket.recv())
            if isinstance(message, Ready):
                return message
            if isinstance(message, Failed):
                raise ValueError(message.reason) if message.usage else RuntimeError(message.reason)
        elif process.poll() is not None:
            raise RuntimeError(say(CORE_EXITED, status=process.returncode))
    raise RuntimeError(say(CORE_NOT_READY, timeout_s=START_TIMEOUT_S))


def _end(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()
