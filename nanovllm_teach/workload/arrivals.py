"""Orchestration: serving a workload, requests that arrive in time, on the engine's public step API.

``serve_workload(engine, workload)`` is the one arrival loop. Open loop (the default), each request joins
``arrival_s`` seconds after the call, on the engine's own clock (simulated seconds for a simulated runner, which
jumps to the next arrival while the engine is idle; the wall clock for a real one, which sleeps), however busy
the engine is. Closed loop (``concurrency=N``), as a serving benchmark's fixed pool of clients runs it, N
requests join at once and each later one joins when an earlier one finishes, so the load follows the engine's
speed. Between arrivals the engine steps; every step's end is a moment the metrics (``workload/metrics.py``)
are taken at.

``admit_every=K`` (off: 1) delays admission as vLLM's multi-step scheduling did (``--num-scheduler-steps K``,
v0.6): its scheduler ran once per K steps, so a request that arrives while the engine is busy waits outside it
until the next step whose number is a multiple of K (at once if the engine is idle), and its TTFT counts the
wait. Only the admission is modelled, not the tokens a multi-step run streams K at a time; use it to
reproduce a measurement of an engine that had it, never to tune the efficiency factors.

``server`` (off: none) is the API server in front of the engine (``ApiServer``). Its work on each request
(parsing, tokenizing, handing it over: ``per_request_s`` plus ``per_prompt_token_s`` per prompt token) runs
in the engine's own loop, as vLLM's API server drove its engine from one event loop: between two steps it
takes in every request that arrived meanwhile, one after the other, and the next step waits for it. A burst
sent at once is therefore all taken in before the first step, and each step of a busy engine is followed by
the work on what arrived during it. Then each request meets ``latency_s``, which it waits for alone, the
engine stepping on (the client's send, the first token's way back as an SSE chunk). Its times still count
from its arrival (closed loop: when its client sent it), so its TTFT and end-to-end latency include all of
it. The costs are the simulator's (``sim/efficiency.py``: fitted on published cases, or measured by the
served calibration); a real engine served by ``run_workload`` has no server in front of it.

``until`` (off: None) ends a run early: after every step it is told the requests that step finished and the
clock, and once it answers True the requests not yet finished are aborted and the run ends there, their times
left as they were. A planner's probe uses it to stop a run whose verdict can no longer change
(``plan/probes.py``).

An answer is ``output_len`` tokens long. A real model writes what it writes, so it runs with
``max_tokens=output_len`` and ``ignore_eos``; a model that follows the workload's lengths (the simulator's:
``answers``) is told each length and ends the answer there with EOS, unless ``ignore_eos``, as in
nano-vllm's benchmark, runs every request to its ``max_tokens``.

Emits nothing itself (the engine emits its events).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from typing import Protocol, Sequence as SequenceOf

from tqdm.auto import tqdm

from nanovllm_teach.engine.frontend import Frontend
from nanovllm_teach.engine.sequence import Sequence
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.sampling_params import SamplingParams
from nanovllm_teach.workload.metrics import RequestTimes, WorkloadResult
from nanovllm_teach.workload.requests import Request

SERVING = Text(en="serving", zh="服务中")  # the progress bar's label
SERVER_SECONDS = Text(en="API server {name} must be a number of seconds in [0, 60), got {value!r}",
                      zh="API server 的 {name} 必须是 [0, 60) 区间内的秒数，收到的是 {value!r}")
BAD_CONCURRENCY = Text(en="concurrency must be an int >= 1 (clients) or None (open loop), got {value!r}",
                       zh="concurrency 必须是 >= 1 的 int（客户端数），或 None（开环），收到的是 {value!r}")
BAD_ADMIT_EVERY = Text(en="admit_every must be an int in 1..1024 (steps between admissions), got {value!r}",
                       zh="admit_every 必须是 1..1024 之间的 int（两次接纳之间的步数），收到的是 {value!r}")
NOT_A_SERVER = Text(en="server must be an ApiServer, got {kind}", zh="server 必须是 ApiServer，收到的是 {kind}")


@dataclass(frozen=True)
class ApiServer:
    """An API server in front of the engine, in seconds (see the module's docstring): its work per request and
    per prompt token, done in the engine's loop between steps, and a latency each request waits for alone."""

    latency_s: float = 0.0
    per_request_s: float = 0.0
    per_prompt_token_s: float = 0.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 60:
                raise ValueError(say(SERVER_SECONDS, name=f.name, value=value))

    def service_s(self, num_prompt_tokens: int) -> float:
        """How long the server works on one request before handing it to the engine."""
        return self.per_request_s + self.per_prompt_token_s * num_prompt_tokens


class AnswerLengths(Protocol):
    """A model that is told how long each answer is (the simulated one)."""

    def expect(self, seq_id: int, num_tokens: int) -> None: ...

    def forget(self, seq_ids: Iterable[int]) -> None: ...


def serve_workload(engine: Frontend, workload: SequenceOf[Request], *, ignore_eos: bool = False,
                   answers: AnswerLengths | None = None, concurrency: int | None = None,
                   progress: bool = False, admit_every: int = 1, server: ApiServer = ApiServer(),
                   until: Callable[[list[RequestTimes], float], bool] | None = None) -> WorkloadResult:
    """Serve ``workload`` and measure it. Every request is validated before the first joins; it refuses
    and aborts as ``generate`` does. ``concurrency``: closed-loop load, that many clients each sending
    its next request (in the workload's order, arrival times ignored) when its last one finishes;
    ``progress``: a tqdm bar of requests done, with the engine's clock and steps per second; ``admit_every``:
    arrived requests join only every that many steps (vLLM's multi-step scheduling; 1: every step);
    ``server``: the API server each request goes through before it joins; ``until``: told each step's finished requests
    and the clock, True ends the run (both: see the module's docstring)."""
    if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, int)
                                    or concurrency < 1):
        raise ValueError(say(BAD_CONCURRENCY, value=concurrency))
    if isinstance(admit_every, bool) or not isinstance(admit_every, int) or not 1 <= admit_every <= 1024:
        raise ValueError(say(BAD_ADMIT_EVERY, value=admit_every))
    if not isinstance(server, ApiServer):
        raise TypeError(say(NOT_A_SERVER, kind=type(server).__name__))
    seqs = [engine.make_sequence(r.prompt_token_ids, _params(r, ignore_eos, answers is not None)) for r in workload]
    if answers is not None and not ignore_eos:  # only once every request is valid: a refusal changes nothing
        for seq, request in zip(seqs, workload):
            answers.expect(seq.seq_id, seq.num_prompt_tokens + request.output_len)
    try:
        pairs = list(zip(workload, seqs))
        if concurrency is None:
            pairs.sort(key=lambda pair: pair[0].arrival_s)
        with engine.serving(seqs, "run_workload()"), tqdm(total=len(pairs), unit="req", disable=not progress,
                                                          desc=say(SERVING)) as bar:
            result = _arrive_and_step(engine, pairs, concurrency, bar, admit_every, server, until)
            unfinished = [seq.seq_id for seq in seqs if not seq.is_finished]  # only where ``until`` ended it
            if unfinished:
                engine.abort(unfinished)
    finally:
        if answers is not None:
            answers.forget(seq.seq_id for seq in seqs)
    result.num_preemptions = sum(seq.num_preemptions for seq in seqs)
    return result


def _params(request: Request, ignore_eos: bool, follows_lengths: bool) -> SamplingParams:
    if follows_lengths:
        return SamplingParams(temperature=0.0, ignore_eos=ignore_eos, max_tokens=request.max_tokens or request.output_len)
    return SamplingParams(temperature=0.0, ignore_eos=True,
                          max_tokens=min(request.max_tokens or request.output_len, request.output_len))


def _arrive_and_step(engine: Frontend, arrivals: list, concurrency: int | None, bar: tqdm,
                     admit_every: int, server: ApiServer,
                     until: Callable[[list[RequestTimes], float], bool] | None) -> WorkloadResult:
    pending = list(reversed(arrivals))  # the next arrival last: popped in order
    at_server: list[tuple[Sequence, float]] = []  # arrived, the server not yet done with them
    on_the_way: deque[tuple[float, float, Sequence]] = deque()  # through the server: (joins at, arrival, seq)
    arrived: list[tuple[Sequence, float]] = []  # reached the engine, not yet admitted: they wait for a scheduling step
    result = WorkloadResult()
    clock = engine.clock
    t0 = clock.now_s()
    in_flight = 0  # closed loop: the clients waiting for an answer
    steps_at, wall_at = 0, time.monotonic()

    while pending or at_server or on_the_way or arrived or not engine.is_finished():
        now = clock.now_s()
        if concurrency is not None:  # every client without an answer to wait for sends its next request now
            while pending and in_flight < concurrency:
                at_server.append((pending.pop()[1], now))
                in_flight += 1
        else:
            while pending and t0 + pending[-1][0].arrival_s <= now:
                request, seq = pending.pop()
                at_server.append((seq, t0 + request.arrival_s))
        if at_server:  # the server takes them in, one after the other, before the engine's next step
            work_s = sum(server.service_s(seq.num_prompt_tokens) for seq, _ in at_server)
            if work_s > 0 and engine.is_finished():  # an idle engine goes on waiting
                clock.wait_until(now + work_s)
            elif work_s > 0:  # a busy one is held up between two steps, not idle
                clock.advance(work_s)
            done = clock.now_s()
            on_the_way.extend((done + server.latency_s, arrival_s, seq) for seq, arrival_s in at_server)
            at_server.clear()
        if engine.is_finished() and not arrived:  # idle until the next request reaches the engine
            if not on_the_way:  # open loop: nothing is sent yet; the next arrival first goes through the server
                clock.wait_until(t0 + pending[-1][0].arrival_s)
                continue
            clock.wait_until(on_the_way[0][0])
        now = clock.now_s()
        while on_the_way and on_the_way[0][0] <= now:
            _, arrival_s, seq = on_the_way.popleft()
            arrived.append((seq, arrival_s))
        if engine.is_finished() or result.num_steps % admit_every == 0:  # the scheduler runs: all who wait join
            for seq, arrival_s in arrived:
                seq.arrival_time = arrival_s  # the trace records how long it waited before joining
                engine.add_sequence(seq)
                result.requests[seq.seq_id] = RequestTimes(arrival_s, seq.num_prompt_tokens)
            arrived.clear()
        engine.step()
        step = engine.last_step
        result.add_step(step.seqs, step.num_tokens > 0, clock.now_s(), step.runner_stats.get("bound"))
        finished = len(step.finished)  # the step's own list: no second pass over its batch
        in_flight -= finished
        if until is not None and until([result.requests[seq_id] for seq_id, _ in step.finished], clock.now_s()):
            break
        if finished and not bar.disable:
            bar.update(finished)
            wall = time.monotonic()
            if wall - wall_at > 0.5:
                rate = (result.num_steps - steps_at) / (wall - wall_at)
                bar.set_postfix_str(f"clock {clock.now_s() - t0:.1f} s, {rate:.0f} steps/s", refresh=False)
                steps_at, wall_at = result.num_steps, wall
    first = min((r.arrival_s for r in result.requests.values()), default=t0)
    result.duration_s = clock.now_s() - first
    return result
