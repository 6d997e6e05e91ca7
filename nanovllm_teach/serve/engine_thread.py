"""Serving (orchestration): the one thread that owns the engine, fed through a thread-safe queue.

The HTTP side (``serve/app.py``, an asyncio loop) never touches the engine. It puts commands on
``EngineThread.inbox`` (``Submit``: token ids and sampling parameters; ``Abort``: a request id) and gets
``Update`` records back on its own loop (``loop.call_soon_threadsafe``, one call per engine step for every
request the step advanced). The engine thread drains the inbox between steps, so a request joins, and an
abort takes effect, at a step boundary: the step stays a transaction and no block is ever freed mid-step.
It holds the engine's ``lock`` around each unit of its work (the inbox drained, then ``is_finished()`` and
``step()``), as the engine's shell (``engine/frontend.py``) asks of a thread that makes several calls one
unit, and releases it while it waits for work; anything else (a notebook reading the engine) takes the same
lock.

While any engine thread runs, the process's GIL switch interval is lowered to ``SWITCH_INTERVAL_S`` (the
last one to stop restores it).
Why: a step is mostly native code that releases the GIL, and the event loop fills that time with the
requests' Python work (parsing, detokenizing, one SSE chunk per token). When the step returns, the engine
thread needs the GIL back; at Python's default interval (5 ms) it waits up to that long for the loop to let
go, a whole decode step of the batch lost each time. Measured at saturation on 2 cores (64 requests x 128
streamed tokens, ``benchmarks/bench_serve.py --saturation``): 44% of offline ``generate`` at 5 ms, 81% at
0.1 ms.

Each request is validated by ``Frontend.make_request`` here (the one validator) and queued by
``enqueue_request``: its ``n`` samples, the later ones held back by the engine until the prompt is cached,
as ``generate`` does. A refusal comes back as an ``Update`` with ``error`` set and nothing queued. A client
that disconnects sends ``Abort``: its samples leave the engine and their KV blocks are freed before the
next step. A sample's last update carries its text as offline ``generate`` returns it (cut before a stop
string) with vLLM's finish and stop reasons (``nanovllm_teach/outputs.py``). Times are measured with the same
``WorkloadResult`` the workload runs use (``workload/metrics.py``), on the engine's clock, and fed to
``ServerMetrics`` (``serve/metrics.py``). If the thread itself dies (a fault outside a step, whose own
failures abort its requests and go on), every request it held or had not taken yet is answered with the
reason, and ``failure`` says it: the routes then answer 503 at once, and ``/health`` 503.

Emits nothing itself (the engine emits its events into its recorder, with real arrival times).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import sys
import threading
from dataclasses import dataclass, field
from typing import Callable

from nanovllm_teach.engine.frontend import Frontend
from nanovllm_teach.logprobs import TokenLogprobs
from nanovllm_teach.engine.sequence import Sequence
from nanovllm_teach.engine.stopping import completion_text
from nanovllm_teach.outputs import api_finish
from nanovllm_teach.sampling_params import SamplingParams
from nanovllm_teach.serve.metrics import ServerMetrics
from nanovllm_teach.workload.metrics import RequestTimes, WorkloadResult

log = logging.getLogger(__name__)

# How often an idle engine thread looks up from its inbox to see whether it should stop (seconds).
IDLE_POLL_S = 0.5
# How long a thread may hold the GIL while another waits for it, while the engine thread runs (seconds;
# Python's default is 0.005): see the module's docstring.
SWITCH_INTERVAL_S = 0.0001


class _ShortSwitchInterval:
    """Counts the running engine threads: the first lowers the switch interval, the last restores it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._saved = 0.0

    def enter(self) -> None:
        with self._lock:
            if self._users == 0:
                self._saved = sys.getswitchinterval()
                sys.setswitchinterval(SWITCH_INTERVAL_S)
            self._users += 1

    def leave(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0:
                sys.setswitchinterval(self._saved)


_SWITCH_INTERVAL = _ShortSwitchInterval()


@dataclass(frozen=True)
class Update:
    """What one step (or a refusal) did to one sample of a request (``index``): tokens new since the last
    update with their log-probabilities (if asked), or the error that refused the request. A sample's last
    update has ``finish_reason`` (vLLM's: stop, length), ``stop_reason`` (the stop string or stop token id
    that ended it, else None) and ``text``, its whole text as offline ``generate`` gives it."""

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


@dataclass(frozen=True)
class Submit:
    request_id: int
    prompt_token_ids: list[int]
    params: SamplingParams
    arrival_s: float  # on the engine's clock: when the HTTP request was received
    deliver: Callable[[Update], None]  # called on the HTTP loop
    stream: bool  # deliver tokens at every step (else once per sample, when it finishes)


@dataclass(frozen=True)
class Abort:
    request_id: int


@dataclass
class _Live:
    submit: Submit
    samples: list[Sequence]
    sent: list[int]  # per sample: completion tokens delivered so far
    counted: list[int]  # per sample: completion tokens counted in the metrics so far
    last_token_s: list[float | None]  # per sample: when its last token came (inter-token latency)
    num_finished: int = 0
    scheduled_s: float | None = None  # the start of the step that first scheduled it
    has_first_token: bool = False


@dataclass
class EngineThread:
    """Owns ``engine`` on one daemon thread; ``loop`` is the asyncio loop updates are delivered on."""

    engine: Frontend
    loop: asyncio.AbstractEventLoop
    metrics: ServerMetrics
    inbox: "queue.SimpleQueue[Submit | Abort | None]" = field(default_factory=queue.SimpleQueue)
    _live: dict[int, _Live] = field(default_factory=dict)  # by request id
    _by_seq: dict[int, tuple[int, int]] = field(default_factory=dict)  # seq_id -> (request id, sample index)
    _times: WorkloadResult = field(default_factory=WorkloadResult)
    _thread: threading.Thread | None = None
    _stopping: bool = False
    _failure: str | None = None
    _taking: Submit | Abort | None = None  # the command being taken (None between commands)

    def start(self) -> None:
        _SWITCH_INTERVAL.enter()
        self._thread = threading.Thread(target=self._run, name="engine", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Abort whatever is left, stop the thread and close the engine (its trace file is complete)."""
        self._stopping = True
        self.inbox.put(None)
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            _SWITCH_INTERVAL.leave()
        self.engine.close()

    def now_s(self) -> float:
        """The engine's clock (a monotonic clock any thread may read; it is no engine state)."""
        return self.engine.clock.now_s()

    # ---- the thread -----------------------------------------------------------------------------

    @property
    def failure(self) -> str | None:
        """Why the engine thread died (None while it lives or after a clean stop)."""
        return self._failure

    def _run(self) -> None:
        try:
            self._serve()
        except BaseException as error:  # the engine is in an unknown state: no request may wait on it any more
            self._failure = f"the engine stopped: {type(error).__name__}: {error}"
            log.exception("the engine thread died; every request fails from now on")
            self._fail_everyone()

    def _serve(self) -> None:
        while not self._stopping:
            with self.engine.lock:
                idle = self.engine.is_finished()
            if idle:  # wait for work without holding the engine
                try:
                    command = self.inbox.get(timeout=IDLE_POLL_S)
                except queue.Empty:
                    continue
                with self.engine.lock:
                    self._take(command)
            with self.engine.lock:
                self._drain()
                if not self._stopping and not self.engine.is_finished():
                    self._step()
        with self.engine.lock:
            self._abort_all("the server is shutting down")

    def _drain(self) -> None:
        while True:
            try:
                self._take(self.inbox.get_nowait())
            except queue.Empty:
                return

    def _fail_everyone(self) -> None:
        """After the thread's death: every request it knows of, and every one still in the inbox (or being
        taken when it died), gets the failure, without touching the engine again."""
        sends = [(live.submit.deliver, Update(error=self._failure)) for live in self._live.values()]
        self._live.clear()
        pending = [self._taking] if self._taking is not None else []
        while True:
            try:
                pending.append(self.inbox.get_nowait())
            except queue.Empty:
                break
        sends += [(command.deliver, Update(error=self._failure, refused=True)) for command in pending
                  if isinstance(command, Submit)]
        self._deliver(sends)

    def _take(self, command: Submit | Abort | None) -> None:
        self._taking = command  # if the thread dies taking it, ``_fail_everyone`` still answers it
        if command is None:
            self._stopping = True
        elif isinstance(command, Abort):
            live = self._live.pop(command.request_id, None)
            if live is not None:
                self.engine.abort(seq.seq_id for seq in live.samples)
                self._forget(live)
                self.metrics.aborted()
                self.metrics.stepped(self.engine, None)
        else:
            self._admit(command)
        self._taking = None  # answered: admitted (it is in ``_live``) or refused

    def _admit(self, submit: Submit) -> None:
        try:
            samples = self.engine.make_request(submit.prompt_token_ids, submit.params)
        except (ValueError, TypeError) as error:
            self._deliver([(submit.deliver, Update(error=str(error), refused=True))])
            return
        for seq in samples:  # the trace's REQUEST_ENQUEUE says how long before it the request arrived
            seq.arrival_time = submit.arrival_s
        self.engine.enqueue_request(samples)
        self._live[submit.request_id] = _Live(submit, samples, [0] * len(samples), [0] * len(samples),
                                              [None] * len(samples))
        for index, seq in enumerate(samples):
            self._by_seq[seq.seq_id] = (submit.request_id, index)
            self._times.requests[seq.seq_id] = RequestTimes(submit.arrival_s, seq.num_prompt_tokens)
        self._deliver([(submit.deliver, Update(accepted=True, num_prompt_tokens=samples[0].num_prompt_tokens))])

    def _step(self) -> None:
        start = self.now_s()
        try:
            self.engine.step()
        except Exception as error:  # the step was rolled back: its requests cannot go on
            log.exception("engine step failed; aborting every request")
            self._abort_all(f"the engine failed: {type(error).__name__}: {error}")
            return
        step = self.engine.last_step
        now = self.now_s()
        self._times.add_step(step.seqs, step.num_tokens > 0, now, None)
        sends = []
        for seq in step.seqs:
            request_id, index = self._by_seq.get(seq.seq_id, (None, 0))
            live = self._live.get(request_id) if request_id is not None else None
            if live is None:
                continue
            times = self._times.requests[seq.seq_id]
            if live.scheduled_s is None:
                live.scheduled_s = start
            if not live.has_first_token and seq.num_completion_tokens:
                live.has_first_token = True
                self.metrics.first_token(times)
            new = seq.num_completion_tokens - live.counted[index]
            if new:
                last = live.last_token_s[index]
                self.metrics.tokens(new, None if last is None else now - last)
                live.counted[index], live.last_token_s[index] = seq.num_completion_tokens, now
            sent = live.sent[index]
            if not seq.is_finished and (not live.submit.stream or seq.num_completion_tokens == sent):
                continue  # not streamed, or a prefill chunk that produced no token yet
            sends.append((live.submit.deliver, self._update(seq, index, sent)))
            live.sent[index] = seq.num_completion_tokens
            if seq.is_finished:
                live.num_finished += 1
                if live.num_finished == len(live.samples):
                    self.metrics.finished(times, live.scheduled_s, sum(live.counted), len(live.samples),
                                          live.submit.params.max_tokens)
                    del self._live[request_id]
                    self._forget(live)
        self.metrics.stepped(self.engine, step)
        self._deliver(sends)

    def _update(self, seq: Sequence, index: int, sent: int) -> Update:
        """Sample ``index``'s tokens after the first ``sent``, and, once it has finished, its ending."""
        start = seq.num_prompt_tokens + sent
        logprobs = () if seq.num_logprobs is None else tuple(seq.logprobs[p] for p in range(start, seq.num_tokens))
        new = tuple(seq.token_ids[start:])  # only the new tokens copied, not the whole answer each step
        if not seq.is_finished:
            return Update(index, new, logprobs, num_prompt_tokens=seq.num_prompt_tokens)
        finish_reason, stop_reason, text = api_finish(seq, completion_text(seq, self.engine.tokenizer))
        return Update(index, new, logprobs, finish_reason, stop_reason, text, num_prompt_tokens=seq.num_prompt_tokens)

    def _forget(self, live: _Live) -> None:
        for seq in live.samples:
            self._by_seq.pop(seq.seq_id, None)
            self._times.requests.pop(seq.seq_id, None)

    def _abort_all(self, why: str) -> None:
        lives = list(self._live.values())
        self._live.clear()
        self.engine.abort(seq.seq_id for live in lives for seq in live.samples)
        for live in lives:
            self._forget(live)
        self.metrics.stepped(self.engine, None)
        self._deliver([(live.submit.deliver, Update(error=why)) for live in lives])

    def _deliver(self, sends: list[tuple[Callable[[Update], None], Update]]) -> None:
        """All of a step's updates in one call onto the HTTP loop (one wake-up, not one per request)."""
        if not sends:
            return

        def deliver_all() -> None:
            for deliver, update in sends:
                deliver(update)
        try:
            self.loop.call_soon_threadsafe(deliver_all)
        except RuntimeError:  # the loop is closed: the server is going down, nobody is listening
            pass
