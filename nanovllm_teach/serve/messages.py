"""Serving: the records the API process and the engine-core process send each other over ZMQ, msgpack-encoded
by msgspec (the transport is ``serve/core_client.py``'s; the engine core's side is ``serve/engine_core.py``).

The engine core is started with a ``CoreSpec``. API process -> engine core: ``Submit`` (a prompt's token ids
and its sampling parameters), ``Abort`` (request ids whose client has gone), ``Shutdown``. Engine core -> API
process: ``Ready`` once (what the routes need to know of the engine), then one ``StepOutput`` per unit of
the core's work (the updates of the requests a step advanced, the numbers the metrics need, the teaching
events for ``/live``), or ``Failed`` when it can no longer serve. Times are ``time.perf_counter()``
seconds, the engine's clock: on Linux a system-wide monotonic clock, so both processes read the same one.

Emits no events.
"""

from __future__ import annotations

from typing import Any

import msgspec

from nanovllm_teach.logprobs import TokenLogprobs
from nanovllm_teach.trace.schema import TraceEvent


class CoreSpec(msgspec.Struct):
    """What the engine core is built from and where it talks (its command line, as JSON): ``inputs`` and
    ``outputs`` are ZMQ addresses the API process has bound (it pushes to ``inputs``, pulls from ``outputs``)."""

    inputs: str
    outputs: str
    model: str | None
    settings: dict[str, Any]
    trace: str | None
    live: bool


class Update(msgspec.Struct, frozen=True):
    """What one step (or a refusal) did to one sample (``index``) of request ``request_id``: tokens new since
    the last update with their log-probabilities (if asked), or the error that refused the request. A
    sample's last update has ``finish_reason`` (vLLM's: stop, length), ``stop_reason`` (the stop string or
    stop token id that ended it, else None) and ``text``, its whole text as offline ``generate`` gives it."""

    request_id: int = -1
    index: int = 0
    token_ids: tuple[int, ...] = ()
    logprobs: tuple[TokenLogprobs, ...] = ()
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    text: str | None = None
    error: str | None = None
    num_prompt_tokens: int = 0
    accepted: bool = False  # the first update: the engine took the request (it is queued)...
    refused: bool = False  # ... or refused it (``error`` says why; nothing was queued)


class Submit(msgspec.Struct, tag=True):
    request_id: int
    prompt_token_ids: list[int]
    params: dict[str, Any]  # a ``SamplingParams``' fields (its union-typed ``stop`` has no msgspec type)
    arrival_s: float  # when the HTTP request was received
    stream: bool  # deliver tokens at every step (else once per sample, when it finishes)


class Abort(msgspec.Struct, tag=True):
    request_ids: list[int]


class Shutdown(msgspec.Struct, tag=True):
    """Abort whatever is left, close the engine (its trace complete) and exit."""


class StepStats(msgspec.Struct, array_like=True):
    """The gauges after a unit of work, and, after a step, its tokens, prefix-cache lookups and preemptions."""

    running: int
    waiting: int
    kv_cache_usage: float
    num_batched_tokens: int | None = None  # None: no step (an abort)
    prefix_queries: int = 0
    prefix_hits: int = 0
    preemptions: int = 0


class Finished(msgspec.Struct, array_like=True):
    """A request whose samples have all finished, as ``ServerMetrics.finished`` takes it."""

    arrival_s: float
    num_prompt_tokens: int
    first_token_s: float | None
    finish_s: float | None
    num_output_tokens: int
    finish_reason: str | None
    scheduled_s: float
    num_generated: int
    n: int
    max_tokens: int
    num_cached_prompt_tokens: int  # prompt tokens its first prefill found in the prefix cache
    num_preemptions: int  # over its samples


class StepOutput(msgspec.Struct, tag=True):
    updates: list[Update] = []
    stats: StepStats | None = None
    first_tokens: list[tuple[float | None, int, int]] = []  # (TTFT, prompt tokens, of them cached) per request
    tokens: list[tuple[int, float | None]] = []  # (new tokens, seconds since the sample's last) per sample
    finished: list[Finished] = []
    aborted: int = 0  # requests aborted because their client left
    events: list[TraceEvent] = []  # the teaching events recorded since the last output (with the live page on)


class Ready(msgspec.Struct, tag=True):
    model: str  # the model's folder (the API process loads its own tokenizer from it)
    max_model_len: int
    max_num_seqs: int
    num_kvcache_blocks: int
    block_size: int
    enable_prefix_caching: bool
    vocab_size: int
    trace_header: dict[str, Any] | None  # the recorder's header (the live page's), None without recording
    pid: int


class Failed(msgspec.Struct, tag=True):
    """The engine core cannot serve (it failed to start, or died): every request fails with ``reason``;
    ``usage``: the failure is the caller's mistake (a bad setting, a missing model), not a fault."""

    reason: str
    usage: bool = False


ToCore = Submit | Abort | Shutdown
FromCore = StepOutput | Ready | Failed
