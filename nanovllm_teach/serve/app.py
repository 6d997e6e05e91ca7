"""Serving: the OpenAI-compatible HTTP API (FastAPI), the API process in front of the engine-core process.

``create_app(core, ...)`` builds the app around an engine core that is already started (an
``EngineCoreClient``, ``serve/core_client.py``). Reading the core's outputs starts with the app's event
loop; when the loop stops, the core is shut down, closing the engine (and finishing its trace file).

Routes: ``POST /v1/completions``, ``POST /v1/chat/completions`` (the model's chat template), ``GET
/v1/models``, ``GET /health``, ``GET /metrics`` (Prometheus text, ``serve/metrics.py``), and, with a
``LiveFeed``, ``GET /live`` and ``GET /live/events`` (``serve/live.py``).

Everything a client sends is bounded before it reaches the engine: the connection's time and the body's
size and time (``serve/http.py``), the fields' types (``serve/protocol.py``: finite numbers, no boolean
for an integer), the prompt (the engine refuses one longer than ``max_model_len``, 400), the answer (a
``max_tokens`` the context has no room for is a 400 naming ``max_model_len``, as vLLM's; unset, it is what
the context has left, at most OpenAI's 16 for completions), the queue (``max_waiting`` sequences beyond the
running batch, each choice of each prompt one sequence, as the engine counts them; more get 503 with
``Retry-After``). A request is tokenized here, in the API process, with its own tokenizer, and validated
by the engine core; a refusal is a 400 naming the field,
and nothing is queued. A completions request may carry a batch of prompts: each is its own engine request,
and prompt ``i``'s ``n`` choices are indexed from ``i * n``, as vLLM's are.

Streaming is Server-Sent Events in OpenAI's chunk format, one chunk per engine step that gave a choice new text
or tokens (``n`` choices share the stream, each chunk naming its ``index``); a stream holds back the last
characters that could be the beginning of a stop string (as many as the longest stop string has, less one, as
vLLM does), so no text is sent that the stop string later cuts. A client that goes away (streamed or not) has
its request aborted, which frees its KV blocks at the next step boundary.

Nothing here touches the engine: it is the engine core's, in its own process. What the routes need of it
(the context length, the batch size) comes in the core's ``Ready``.

Emits nothing itself.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable

import msgspec
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from nanovllm_teach.sampling_params import MAX_N, SamplingParams
from nanovllm_teach.serve.core_client import EngineCoreClient
from nanovllm_teach.serve.detokenize import IncrementalText
from nanovllm_teach.serve.http import RequireApiKey, add_client_gone_handler, read_body
from nanovllm_teach.serve.limits import ServeLimits
from nanovllm_teach.serve.messages import Submit, Update
from nanovllm_teach.serve.metrics import ServerMetrics
from nanovllm_teach.i18n import say
from nanovllm_teach.serve.protocol import (MAX_TOKENS_TOO_LARGE, MODEL_NOT_FOUND, MORE_THAN_CAPACITY, QUEUE_FULL,
                                           TOO_MANY_CHOICES, ApiError, ChatRequest, CompletionRequest, Shape,
                                           chat_logprobs, chat_prompt_ids, completion_logprobs, parse, prompt_ids,
                                           usage)

COMPLETION_MAX_TOKENS = 16  # OpenAI's default for /v1/completions; chat's is what the context has left
_ENCODE = msgspec.json.Encoder().encode


class Server:
    """What the routes share: the engine core's client, the API process's tokenizer, the limits, the count of
    sequences in flight (touched only on the event loop's thread)."""

    def __init__(self, core: EngineCoreClient, tokenizer: Any, model_name: str, limits: ServeLimits) -> None:
        self.core, self.tokenizer, self.model_name, self.limits = core, tokenizer, model_name, limits
        self.max_model_len = core.ready.max_model_len
        self.capacity = core.ready.max_num_seqs + limits.max_waiting
        ready = core.ready
        self.metrics = ServerMetrics(model_name, self.max_model_len, {
            "block_size": str(ready.block_size), "cache_dtype": "auto",
            "enable_prefix_caching": str(ready.enable_prefix_caching), "num_gpu_blocks": str(ready.num_kvcache_blocks),
            "kv_cache_size_tokens": str(ready.num_kvcache_blocks * ready.block_size),
            "prefix_caching_hash_algo": "xxhash"})
        core.metrics = self.metrics
        self.in_flight = 0
        self._ids = itertools.count()

    # ---- one request ------------------------------------------------------------------------------

    def check_model(self, model: str) -> None:
        if model != self.model_name:
            raise ApiError(404, say(MODEL_NOT_FOUND, model=model, served=self.model_name), param="model",
                           code="model_not_found")

    def params(self, req: CompletionRequest | ChatRequest, num_prompt_tokens: int,
               default_max_tokens: int | None) -> SamplingParams:
        """``req``'s sampling parameters, for a (longest) prompt of ``num_prompt_tokens``; an unset
        ``max_tokens`` is ``default_max_tokens`` (None: all the room the context has left), at most that room."""
        max_tokens = req.max_tokens
        if isinstance(req, ChatRequest) and req.max_completion_tokens is not None:
            max_tokens = req.max_completion_tokens
        room = self.max_model_len - num_prompt_tokens
        if max_tokens is None:
            max_tokens = max(1, room if default_max_tokens is None else min(default_max_tokens, room))
        elif max_tokens > room >= 0:  # (a prompt longer than the context is the engine's 400, which names it)
            raise ApiError(400, say(MAX_TOKENS_TOO_LARGE, max_tokens=max_tokens, max_model_len=self.max_model_len,
                                    prompt_tokens=num_prompt_tokens), param="max_tokens")
        values = {"temperature": 1.0 if req.temperature is None else req.temperature,
                  "max_tokens": max_tokens,
                  "seed": req.seed, "ignore_eos": req.ignore_eos, "top_p": 1.0 if req.top_p is None else req.top_p,
                  "top_k": req.top_k or 0, "min_p": req.min_p or 0.0, "n": req.n, "stop": req.stop,
                  "stop_token_ids": req.stop_token_ids, "logprobs": req.num_logprobs()}
        try:
            return SamplingParams(**values)
        except (TypeError, ValueError) as error:
            # The message begins with the field's name (in both languages), or says it in words ("every stop token
            # id must ...").
            message = str(error).removeprefix("every ")
            field = next((name for name in sorted(values, key=len, reverse=True)
                          if message.startswith((name, name.replace("_", " ").removesuffix("s")))), None)
            raise ApiError(400, str(error), param=field) from None

    async def run(self, request: Request, req: CompletionRequest | ChatRequest, prompts: list[list[int]],
                  params: SamplingParams, chat: bool) -> Response:
        """Serve ``prompts`` (one engine request each, all with ``params``) as one response."""
        if len(prompts) * params.n > MAX_N:
            raise ApiError(400, say(TOO_MANY_CHOICES, prompts=len(prompts), n=params.n, limit=MAX_N), param="n")
        if self.core.failure is not None:  # fail fast: nothing would ever answer
            raise ApiError(503, self.core.failure)
        num_seqs = len(prompts) * params.n  # what the queue holds: each choice of each prompt is a sequence
        if num_seqs > self.capacity:  # no retry would ever fit it: the client's mistake, not a busy server
            raise ApiError(400, say(MORE_THAN_CAPACITY, count=num_seqs, capacity=self.capacity), param="n")
        if self.in_flight + num_seqs > self.capacity:
            self.metrics.refused_queue_full()
            raise ApiError(503, say(QUEUE_FULL, waiting=self.limits.max_waiting, count=num_seqs),
                           headers={"Retry-After": "1"})
        flight = _Flight(self, [next(self._ids) for _ in prompts], num_seqs)
        try:
            now_s = time.perf_counter()  # the engine's clock (serve/messages.py)
            fields = dataclasses.asdict(params)
            for offset, (request_id, token_ids) in enumerate(zip(flight.request_ids, prompts)):
                self.core.submit(Submit(request_id, token_ids, fields, now_s, stream=req.stream),
                                 flight.deliverer(offset * params.n))
            num_prompt_tokens = 0
            for _ in prompts:  # each prompt's first update: queued, or refused (and then none is served)
                first = await flight.admissions.get()
                if first.error is not None and self.core.failure is not None:
                    raise ApiError(503, first.error)
                if first.error is not None:
                    raise ApiError(400, first.error, param="messages" if chat else "prompt")
                num_prompt_tokens += first.num_prompt_tokens
            shape = Shape(chat, self.model_name)
            choices = [_Choice(self.tokenizer, params, chat) for _ in range(len(prompts) * params.n)]
            if req.stream:
                include_usage = req.stream_options is not None and req.stream_options.include_usage
                stream = _Stream(self._stream(flight, shape, choices, num_prompt_tokens, include_usage),
                                 media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
                stream.flight, flight = flight, None  # the response closes it, whenever and however it ends
                return stream
            for _ in choices:
                update = await self._until_finished_or_gone(request, flight)
                if update is None:
                    return Response(status_code=499)  # the client left; ``close`` aborts the request
                if update.error is not None:
                    flight.finished = True
                    raise ApiError(500, update.error)
                choices[update.index].add(update)
            flight.finished = True
            body = shape.whole([c.result() for c in choices],
                               usage(num_prompt_tokens, sum(c.num_tokens for c in choices)))
            return Response(_ENCODE(body), media_type="application/json")
        finally:
            if flight is not None:
                flight.close()

    async def _until_finished_or_gone(self, request: Request, flight: "_Flight") -> Update | None:
        """The request's next update, or None if the client went away first."""
        result = asyncio.ensure_future(flight.updates.get())
        gone = asyncio.ensure_future(_disconnected(request))
        try:
            await asyncio.wait({result, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
            if not result.done():
                result.cancel()
        return result.result() if result.done() and not result.cancelled() else None

    async def _stream(self, flight: "_Flight", shape: Shape, choices: list["_Choice"], num_prompt_tokens: int,
                      include_usage: bool) -> AsyncIterator[bytes]:
        if shape.chat:
            yield b"".join(_sse(shape.chunk(index, None, role=True)) for index in range(len(choices)))
        while not flight.finished:
            # Every update waiting now goes out in one write (still one event per token): a stream that
            # fell behind catches up without one trip through the server per token.
            pending = [await flight.updates.get()]
            while not flight.updates.empty():
                pending.append(flight.updates.get_nowait())
            events = [self._events(flight, update, choices, shape) for update in pending]
            if include_usage and all(c.finished for c in choices):  # (not after an error)
                events.append(_sse(shape.usage_chunk(usage(num_prompt_tokens, sum(c.num_tokens for c in choices)))))
            yield b"".join(events)
        yield b"data: [DONE]\n\n"

    @staticmethod
    def _events(flight: "_Flight", update: Update, choices: list["_Choice"], shape: Shape) -> bytes:
        """The Server-Sent Events of one update (none for a token that completes no character)."""
        if flight.finished:
            return b""
        if update.error is not None:
            flight.finished = True
            return _sse(ApiError(500, update.error).body())
        choice = choices[update.index]
        piece, logprobs = choice.add(update)
        events = []
        if logprobs is not None:
            events.append(_sse(shape.chunk(update.index, piece, logprobs=logprobs)))
        elif piece:
            events.append(shape.delta_event(update.index, piece))
        if update.finish_reason is not None:
            events.append(_sse(shape.chunk(update.index, None, update.finish_reason, stop_reason=update.stop_reason)))
            flight.finished = all(c.finished for c in choices)
        return b"".join(events)


class _Choice:
    """One choice of a response as its updates arrive: the text sent so far (a stream holds back what could
    begin a stop string), the tokens counted, the log-probabilities in the request's shape."""

    def __init__(self, tokenizer: Any, params: SamplingParams, chat: bool) -> None:
        self.tokenizer, self.chat = tokenizer, chat
        self.text = IncrementalText(tokenizer, params.skip_special_tokens)
        self.hold = max((len(stop) for stop in params.stop), default=1) - 1
        self.wants_logprobs = params.logprobs is not None
        self.sent = ""
        self.num_tokens = 0
        self.logprobs: dict[str, list] | None = None  # every token's, gathered (the whole response's)
        self.finished = False
        self.finish_reason: str | None = None
        self.stop_reason: int | str | None = None

    def add(self, update: Update) -> tuple[str, dict[str, list] | None]:
        """The text ``update`` lets this choice send now, and its tokens' log-probabilities (None: not asked)."""
        self.num_tokens += len(update.token_ids)
        logprobs = None
        if self.wants_logprobs:
            logprobs = (chat_logprobs(self.tokenizer, update.logprobs) if self.chat else
                        completion_logprobs(self.tokenizer, update.logprobs, self._offset()))
            if self.logprobs is None:
                self.logprobs = {key: [] for key in logprobs}
            for key, values in logprobs.items():
                self.logprobs[key].extend(values)
        if update.finish_reason is not None:
            self.finished, self.finish_reason, self.stop_reason = True, update.finish_reason, update.stop_reason
            piece = update.text[len(self.sent):]  # the whole text starts with what was sent: nothing sent is cut
        else:
            self.text.add(update.token_ids)
            safe = len(self.text.sent) - self.hold
            piece = self.text.sent[len(self.sent):max(safe, len(self.sent))]
        self.sent += piece
        return piece, logprobs

    def _offset(self) -> int:
        """Where the next token's text begins (the legacy ``text_offset``)."""
        if self.logprobs is None or not self.logprobs["tokens"]:
            return 0
        return self.logprobs["text_offset"][-1] + len(self.logprobs["tokens"][-1])

    def result(self) -> dict[str, Any]:
        return {"text": self.sent, "logprobs": self.logprobs, "finish_reason": self.finish_reason,
                "stop_reason": self.stop_reason}


class _Flight:
    """One response in flight: its engine requests (one per prompt), whether each was queued or refused
    (``admissions``), their tokens' updates in one queue (``updates``, each update's ``index`` the choice's in
    the response), and the one place it ends (``close``: every request aborted in the engine if the response
    has not finished, and no longer counted). Admissions have their own queue: a prompt's first tokens may
    come before a later prompt of the same response is queued."""

    def __init__(self, server: Server, request_ids: list[int], num_seqs: int) -> None:
        self.server, self.request_ids, self.num_seqs = server, request_ids, num_seqs
        self.admissions: asyncio.Queue[Update] = asyncio.Queue()
        self.updates: asyncio.Queue[Update] = asyncio.Queue()
        self.finished = False
        self._closed = False
        server.in_flight += num_seqs

    def deliverer(self, first_index: int) -> Callable[[Update], None]:
        """What the core's client calls (on the loop) with the updates of the request whose choices begin at
        ``first_index`` of the response."""
        def deliver(update: Update) -> None:
            if update.accepted or update.refused:
                self.admissions.put_nowait(update)
            else:
                self.updates.put_nowait(msgspec.structs.replace(update, index=update.index + first_index)
                                        if first_index else update)
        return deliver

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.server.in_flight -= self.num_seqs
        self.server.core.forget(self.request_ids)
        if not self.finished:  # the client left (or the response failed, or a prompt was refused): free blocks
            self.server.core.abort(self.request_ids)


class _Stream(StreamingResponse):
    """A streamed response that closes its request however it ends: finished, client gone (starlette
    cancels the stream), or never started."""

    flight: _Flight

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.flight.close()


async def _disconnected(request: Request) -> None:
    """Returns when the client has gone (the body is read already: the next message is the disconnect)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def _sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + _ENCODE(obj) + b"\n\n"


def _error(error: ApiError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


def create_app(core: EngineCoreClient, *, model_name: str, tokenizer: Any, limits: ServeLimits | None = None,
               live: Any = None, api_key: str | None = None) -> FastAPI:
    """The app serving the engine ``core`` runs as ``model_name``; ``tokenizer``: the API process's own copy of
    the engine's tokenizer; ``live``: a ``LiveFeed`` (``serve/live.py``) to serve the live page from, fed
    with the core's teaching events, or None; ``api_key``: the key every ``/v1`` and ``/live`` route asks
    for (``Authorization: Bearer KEY``), or None for none."""
    server = Server(core, tokenizer, model_name, limits or ServeLimits())
    core.feed = live

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        core.begin()
        try:
            yield
        finally:
            await core.end()

    app = FastAPI(title="nanovllm-teach", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.server = server
    app.state.live = live

    @app.exception_handler(ApiError)
    async def api_error(request: Request, error: ApiError) -> JSONResponse:
        return _error(error)

    add_client_gone_handler(app)
    if api_key is not None:
        app.add_middleware(RequireApiKey, key=api_key)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        req = parse(CompletionRequest, await read_body(request, server.limits))
        server.check_model(req.model)
        prompts = [prompt_ids(tokenizer, prompt) for prompt in req.prompts()]
        params = server.params(req, max(map(len, prompts)), COMPLETION_MAX_TOKENS)
        return await server.run(request, req, prompts, params, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        req = parse(ChatRequest, await read_body(request, server.limits))
        server.check_model(req.model)
        token_ids = chat_prompt_ids(tokenizer, req)
        return await server.run(request, req, [token_ids], server.params(req, len(token_ids), None), chat=True)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": model_name, "object": "model", "owned_by": "nanovllm-teach",
                                            "max_model_len": server.max_model_len}]}

    @app.get("/health")
    async def health() -> Response:
        """200 while the engine core serves; 503 once it has died (as vLLM's when its engine core is gone)."""
        return Response(status_code=200 if server.core.failure is None else 503)

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(server.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    if live is not None:
        live.mount(app)
    return app
