"""The deployment planner's pieces, one engine configuration at a time (orchestration, above ``LLM``).

The question a planner asks: which GPU, tensor-parallel degree, replica count and batch limits serve a workload
at a target rate within a latency SLO, at the lowest cost. Vidur's answer (Agrawal et al., "Vidur: A Large-Scale
Simulation Framework for LLM Inference", MLSys 2024: Vidur-Search) is the one taken here: for every
configuration, a search over request rates finds the highest rate it *sustains*, each probe a simulated run.

- ``Candidate``: the engine settings a search is run for (GPU, ``tensor_parallel_size``, ``max_num_seqs``,
  ``max_num_batched_tokens``, the weights' ``quantization``). Replicas need no search of their own: arrivals split at random over R identical
  replicas make each one a Poisson stream at rate/R (the splitting property of a Poisson process), so R
  replicas sustain R times what one does.
- ``PlanWorkload``: what each probe serves: the model, prompt and output lengths, how many requests are a
  warm-up (not measured) and how many are the probe (measured), the random seed of its arrivals and lengths.
- ``Objective``: the SLO: a TTFT and a TPOT limit at a quantile (p50, p90, p99), and optionally goodput: the share
  of requests meeting both limits at once.
- ``probe``: one simulated run at one rate (``None``: every request at once, which measures the most the engine
  completes per second). It *passes* when the measured requests meet the objective and the requests in the system
  do not pile up over the probe: the mean number that had arrived and not finished, at the arrivals of the last
  quarter of the measured requests, is at most ``QUEUE_GROWTH`` times that at the first quarter's, plus
  ``QUEUE_SLACK``. (An engine that prefills first gives a newcomer its first token at once even when overloaded:
  what piles up then is the running batch, whose tokens come ever more slowly.)
  A probe at a rate stops as soon as it cannot pass any more (``FailureWatch``): the requests in the system at
  the last quarter's arrivals already outnumber the limit, or more measured requests finished over a limit
  than its quantile allows. Its verdict and the search are the same as a run to the end would give; its
  figures (``decided_early``) are those of the requests finished by then. The saturation probe always runs to
  the end: its rate is the search's bracket.
- ``memory_fit``: what a configuration holds before anything runs (``sim/budget.py``): weights and KV blocks per
  GPU, the longest request that fits.

The search over rates that asks for each probe is ``plan/rates.py``.

Emits no events (the simulated engines it runs emit theirs, to no recorder).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import asdict, dataclass

from nanovllm_teach.i18n import Text, say
from nanovllm_teach.plan.messages import (BAD_GOODPUT, BAD_QUANTILE, INT_TOO_SMALL, LENGTHS_DO_NOT_FIT,
                                          LONGEST_DOES_NOT_FIT, NOT_A_DATASHEET_GPU, RECORDED_REQUEST_TOO_LONG,
                                          TOO_FEW_PROBE_REQUESTS)
from nanovllm_teach.settings import NOT_A_CHOICE, SERVING_ENGINES
from nanovllm_teach.sim.budget import estimated_kv_blocks, weight_bytes
from nanovllm_teach.sim.cost_model import StepCostModel, load_shape
from nanovllm_teach.sim.hardware import CPU_DEVICE_NAME, DEVICES, GIB
from nanovllm_teach.workload.metrics import RequestTimes, Slo, WorkloadResult, percentile
from nanovllm_teach.plan.recorded import RecordedRequests
from nanovllm_teach.workload.requests import AtOnce, Lengths, Poisson, Request, make_workload, parse_lengths

QUEUE_GROWTH = 1.2  # a quarter's mean against another's: Poisson noise over 250 arrivals moves it less
QUEUE_SLACK = 2.0  # requests: a request or two comes and goes at any load
QUANTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99}
MIN_PROBE_REQUESTS = 1000


@dataclass(frozen=True, order=True)
class Candidate:
    """One engine configuration to search (a replica's; replicas multiply it)."""

    hardware: str
    tensor_parallel_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    quantization: str | None = None  # "fp8": FP8 weights (None: 16-bit)

    @property
    def key(self) -> str:
        return (f"{self.hardware}/tp{self.tensor_parallel_size}/seqs{self.max_num_seqs}/"
                f"tokens{self.max_num_batched_tokens}" + (f"/{self.quantization}" if self.quantization else ""))


@dataclass(frozen=True)
class PlanWorkload:
    """What every probe serves: the lengths as ``simulate``'s ``--prompt-lens``/``--output-lens`` forms, or
    ``recorded``: a trace's requests (``plan/recorded.py``), whose lengths and gaps replace the forms'."""

    model: str
    prompt_lens: str = "sharegpt-prompt"
    output_lens: str = "sharegpt-output"
    max_model_len: int = 8192
    warmup_requests: int = 200
    probe_requests: int = MIN_PROBE_REQUESTS
    seed: int = 0
    recorded: RecordedRequests | None = None
    serving_engine: str | None = None  # whose collectives' cost every probe takes (settings.SERVING_ENGINES)

    def __post_init__(self) -> None:
        for name, least in (("max_model_len", 1), ("warmup_requests", 0), ("probe_requests", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(say(INT_TOO_SMALL, name=name, least=least, value=value))
        if self.serving_engine is not None and self.serving_engine not in SERVING_ENGINES:
            raise ValueError(say(NOT_A_CHOICE, name="serving_engine", choices=SERVING_ENGINES, value=self.serving_engine))
        if self.probe_requests < MIN_PROBE_REQUESTS:
            raise ValueError(say(TOO_FEW_PROBE_REQUESTS, least=MIN_PROBE_REQUESTS, value=self.probe_requests))
        if self.recorded is None:
            self.lengths()  # refuses a bad form now, naming it
        elif self.recorded.longest_request > self.max_model_len:
            raise ValueError(say(RECORDED_REQUEST_TOO_LONG, source=self.recorded.source,
                                 longest=self.recorded.longest_request, max_model_len=self.max_model_len))

    @property
    def num_requests(self) -> int:
        return self.warmup_requests + self.probe_requests

    def lengths(self) -> tuple[Lengths, Lengths]:
        """The prompt and output length distributions, cut as ``simulate`` cuts them: an output at most a quarter
        of ``max_model_len``, a prompt at most the rest."""
        output_hi = max(1, self.max_model_len // 4)
        prompts = parse_lengths(self.prompt_lens, hi=max(1, self.max_model_len - output_hi))
        outputs = parse_lengths(self.output_lens, hi=output_hi)
        if prompts.longest + outputs.longest > self.max_model_len:
            raise ValueError(say(LENGTHS_DO_NOT_FIT, prompt=prompts.longest, output=outputs.longest,
                                 max_model_len=self.max_model_len))
        return prompts, outputs

    @property
    def longest_request(self) -> int:
        if self.recorded is not None:
            return self.recorded.longest_request
        prompts, outputs = self.lengths()
        return prompts.longest + outputs.longest

    def requests(self, rate: float | None) -> list[Request]:
        """A probe's requests at ``rate`` requests/s (None: all at once)."""
        vocab_size = load_shape(self.model).vocab_size
        if self.recorded is not None:
            return self.recorded.requests(self.num_requests, rate, vocab_size, self.seed)
        prompts, outputs = self.lengths()
        return make_workload(self.num_requests, AtOnce() if rate is None else Poisson(rate), prompts, outputs,
                             vocab_size=vocab_size, seed=self.seed)


@dataclass(frozen=True)
class Objective:
    """The SLO a probe must meet: each limit in milliseconds at a quantile of the measured requests; with
    ``goodput``, instead, that share of them meeting both limits at once."""

    ttft_ms: float
    tpot_ms: float
    ttft_quantile: str = "p99"
    tpot_quantile: str = "p99"
    goodput: float | None = None

    def __post_init__(self) -> None:
        Slo(self.ttft_ms, self.tpot_ms)  # its own checks of the two limits
        for name in ("ttft_quantile", "tpot_quantile"):
            if getattr(self, name) not in QUANTILES:
                raise ValueError(say(BAD_QUANTILE, name=name, choices=", ".join(QUANTILES), value=getattr(self, name)))
        if self.goodput is not None and not (isinstance(self.goodput, float) and 0 < self.goodput <= 1):
            raise ValueError(say(BAD_GOODPUT, value=self.goodput))

    def describe(self) -> str:
        """The SLO in a line, in the learner's language."""
        if self.goodput is not None:
            return say(GOODPUT_SLO, share=self.goodput, ttft=self.ttft_ms, tpot=self.tpot_ms)
        return say(QUANTILE_SLO, ttft_q=self.ttft_quantile, ttft=self.ttft_ms, tpot_q=self.tpot_quantile,
                   tpot=self.tpot_ms)


GOODPUT_SLO = Text(en="{share:.0%} of requests with TTFT <= {ttft:g} ms and TPOT <= {tpot:g} ms",
                   zh="{share:.0%} 的请求同时满足首 token 延迟 <= {ttft:g} ms、每个输出 token 的时间 <= {tpot:g} ms")
QUANTILE_SLO = Text(en="TTFT {ttft_q} <= {ttft:g} ms, TPOT {tpot_q} <= {tpot:g} ms",
                    zh="首 token 延迟的 {ttft_q} <= {ttft:g} ms，每个输出 token 的时间的 {tpot_q} <= {tpot:g} ms")


@dataclass(frozen=True)
class Probe:
    """One probe's outcome (times in ms over the measured requests; ``rate`` None: the saturation probe)."""

    rate: float | None
    passed: bool
    ttft_p50_ms: float
    ttft_p99_ms: float
    tpot_p50_ms: float
    tpot_p99_ms: float
    good_share: float  # measured requests meeting both limits at once
    in_system_first: float  # mean requests arrived and not finished, at the first quarter's arrivals
    in_system_last: float  # ... at the last quarter's
    requests_per_s: float  # all requests over the run
    output_tokens_per_s: float
    decided_early: bool = False  # failed before the end (``FailureWatch``): the figures are the finished requests'

    def to_dict(self) -> dict:
        return asdict(self)


def _round(x: float) -> float:
    """Six significant digits: what a table shows, and the same digits wherever the probe ran."""
    return float(f"{x:.6g}")


def probe(candidate: Candidate, workload: PlanWorkload, objective: Objective, rate: float | None) -> Probe:
    """One simulated run of ``workload`` on ``candidate`` at ``rate`` requests/s (None: all at once)."""
    from nanovllm_teach.llm import LLM  # torch: only where a probe runs
    from nanovllm_teach.workload.arrivals import serve_workload

    llm = LLM(workload.model, runner="simulated", hardware=candidate.hardware,
              tensor_parallel_size=candidate.tensor_parallel_size, max_num_seqs=candidate.max_num_seqs,
              max_num_batched_tokens=candidate.max_num_batched_tokens, max_model_len=workload.max_model_len,
              quantization=candidate.quantization, serving_engine=workload.serving_engine)
    requests = workload.requests(rate)
    watch = None if rate is None else FailureWatch.of(requests, workload.warmup_requests, objective, llm.clock.now_s())
    try:
        result = serve_workload(llm, requests, answers=llm.answers, server=llm.server, until=watch)
    finally:
        llm.close()
    if watch is not None and watch.failed:
        return watch.verdict(rate, result)
    times = sorted(result.requests.values(), key=lambda t: t.arrival_s)
    measured = times[workload.warmup_requests:]
    in_system_first, in_system_last = _in_system(times, measured)
    return _figures(rate, objective, measured, in_system_first, in_system_last, len(times), result)


def _figures(rate: float | None, objective: Objective, measured: list, in_system_first: float,
             in_system_last: float, num_finished: int, result: WorkloadResult, decided_early: bool = False) -> Probe:
    """The probe's record, from the measured requests' times (those finished, for one decided early: a TTFT or
    TPOT of 0 where none had one)."""
    ttft = [t.ttft_s * 1e3 for t in measured if t.ttft_s is not None] or [0.0]
    # One-token answers have no time between tokens: a probe of only those holds TPOT to nothing.
    tpot = [t.tpot_s * 1e3 for t in measured if t.tpot_s is not None] or [0.0]
    slo = Slo(objective.ttft_ms, objective.tpot_ms)
    good = sum(t.meets(slo) for t in measured) / max(1, len(measured))
    if objective.goodput is not None:
        met = good >= objective.goodput
    else:
        met = (percentile(ttft, QUANTILES[objective.ttft_quantile]) <= objective.ttft_ms
               and percentile(tpot, QUANTILES[objective.tpot_quantile]) <= objective.tpot_ms)
    passed = met and not _growing(in_system_first, in_system_last) and not decided_early
    return Probe(rate, passed, *(_round(percentile(v, q)) for v, q in
                                 ((ttft, 0.5), (ttft, 0.99), (tpot, 0.5), (tpot, 0.99))),
                 _round(good), _round(in_system_first), _round(in_system_last),
                 _round(num_finished / result.duration_s), _round(result.output_tokens_per_s), decided_early)


def _growing(in_system_first: float, in_system_last: float) -> bool:
    return in_system_last > QUEUE_GROWTH * in_system_first + QUEUE_SLACK


class FailureWatch:
    """``serve_workload``'s ``until`` for a probe at a rate: True once the probe can no longer pass, from what is
    already settled. A run's clock only moves forward, so once it is past an arrival every request that finished
    before that arrival has finished, and the count in the system then is final; a finished request's TTFT and
    TPOT are final too. It watches three things: the requests in the system at the last quarter's arrivals (the
    counts settled so far, the rest at least 0, already above the growth limit), and the measured requests that
    finished over the TTFT limit, and over the TPOT limit (already more than the quantile allows; with
    ``goodput``, more failing either than the share allows)."""

    def __init__(self, arrivals: list[float], warmup: int, measured_from: float, objective: Objective,
                 num_tpot: int) -> None:
        self.arrivals, self.measured_from, self.objective = arrivals, measured_from, objective
        measured = len(arrivals) - warmup
        quarter = max(1, measured // 4)
        self.watched = arrivals[warmup:warmup + quarter] + arrivals[-quarter:]  # the first quarter's, the last's
        self.quarter = quarter
        self.num_measured, self.num_tpot = measured, num_tpot
        self.finishes: list[float] = []  # in the order the clock reached them: sorted
        self.settled = 0  # the first and last quarters' arrivals the clock is past, in order
        self.first_sum = self.last_sum = 0
        self.over_ttft = self.over_tpot = self.bad = 0
        self.slo = Slo(objective.ttft_ms, objective.tpot_ms)
        self.failed = False

    @classmethod
    def of(cls, requests: list[Request], warmup: int, objective: Objective, t0: float) -> FailureWatch | None:
        """The watch for ``requests`` as ``serve_workload`` will time them from ``t0``; None when the first
        measured request's arrival is shared with a warm-up one (which of them is measured is not known then)."""
        arrivals = sorted(t0 + r.arrival_s for r in requests)
        if warmup and arrivals[warmup - 1] == arrivals[warmup]:
            return None
        num_tpot = sum(r.output_len >= 2 for r in sorted(requests, key=lambda r: r.arrival_s)[warmup:])
        return cls(arrivals, warmup, arrivals[warmup], objective, num_tpot)

    def __call__(self, finished: list[RequestTimes], now_s: float) -> bool:
        self.finishes.extend(t.finish_s for t in finished)
        for t in finished:
            if t.arrival_s >= self.measured_from:
                ttft_ms, tpot_s = t.ttft_s * 1e3, t.tpot_s
                self.over_ttft += ttft_ms > self.objective.ttft_ms
                self.over_tpot += tpot_s is not None and tpot_s * 1e3 > self.objective.tpot_ms
                self.bad += not t.meets(self.slo)
        self._settle(now_s)
        self.failed = self._cannot_pass()
        return self.failed

    def verdict(self, rate: float, result: WorkloadResult) -> Probe:
        """The failed probe's record: the finished requests' figures, the counts in the system settled so far."""
        finished = sorted((t for t in result.requests.values() if t.finish_s is not None), key=lambda t: t.arrival_s)
        measured = [t for t in finished if t.arrival_s >= self.measured_from]
        return _figures(rate, self.objective, measured, self.first_sum / self.quarter, self.last_sum / self.quarter,
                        len(finished), result, decided_early=True)

    def _settle(self, now_s: float) -> None:
        """Count the requests in the system at each watched arrival the clock is now strictly past (a later finish
        is later than now)."""
        watched = self.watched
        while self.settled < len(watched) and watched[self.settled] < now_s:
            at = watched[self.settled]
            count = bisect_right(self.arrivals, at) - bisect_right(self.finishes, at)
            if self.settled < self.quarter:
                self.first_sum += count
            else:
                self.last_sum += count
            self.settled += 1

    def _cannot_pass(self) -> bool:
        objective = self.objective
        if self.settled >= self.quarter and _growing(self.first_sum / self.quarter, self.last_sum / self.quarter):
            return True
        if objective.goodput is not None:
            return (self.num_measured - self.bad) / self.num_measured < objective.goodput
        # percentile() takes the sorted values' entry at int(q * n): over the limit once n - int(q * n) are
        return (self.over_ttft >= _allowed(self.num_measured, objective.ttft_quantile)
                or self.over_tpot >= _allowed(self.num_tpot, objective.tpot_quantile))


def _allowed(n: int, quantile: str) -> int:
    """How many values over a limit put the ``quantile`` of ``n`` values over it."""
    return n - min(n - 1, int(QUANTILES[quantile] * n))


def _in_system(everyone: list, measured: list) -> tuple[float, float]:
    """Mean requests that had arrived and not finished, at each arrival of the first and of the last quarter of
    the measured requests."""
    arrivals = [t.arrival_s for t in everyone]
    finishes = sorted(t.finish_s for t in everyone)

    def mean_in_system(part: list) -> float:
        return sum(bisect_right(arrivals, t.arrival_s) - bisect_right(finishes, t.arrival_s) for t in part) / len(part)

    quarter = max(1, len(measured) // 4)
    return mean_in_system(measured[:quarter]), mean_in_system(measured[-quarter:])


@dataclass(frozen=True)
class MemoryFit:
    """What one GPU of a configuration holds: weights, the KV blocks left for the cache, and the longest request
    (prompt and answer) they can hold; ``problem`` says why it cannot serve the workload, if it cannot."""

    weights_gib: float
    kv_blocks: int
    longest_tokens: int
    problem: str | None


def memory_fit(candidate: Candidate, workload: PlanWorkload, block_size: int = 256,
               gpu_memory_utilization: float = 0.9) -> MemoryFit:
    """The simulated runner's own sizing (``sim/budget.py``), before anything is built."""
    if candidate.hardware == CPU_DEVICE_NAME or candidate.hardware not in DEVICES:
        raise ValueError(say(NOT_A_DATASHEET_GPU, gpus=", ".join(DEVICES), hardware=candidate.hardware))
    shape = load_shape(workload.model)
    shape.check_tensor_parallel(candidate.tensor_parallel_size)
    cost_model = StepCostModel(shape, DEVICES[candidate.hardware], tensor_parallel_size=candidate.tensor_parallel_size,
                               quantization=candidate.quantization)
    weights = weight_bytes(cost_model) / GIB
    max_len = min(workload.max_model_len, shape.max_position_embeddings)
    try:
        blocks = estimated_kv_blocks(cost_model, gpu_memory_utilization, max_len,
                                     candidate.max_num_batched_tokens, candidate.max_num_seqs, block_size)
    except ValueError as error:
        return MemoryFit(weights, 0, 0, re.split("[:：]", str(error))[0])  # what, not the remedies after it
    longest = min(max_len, blocks * block_size)
    problem = (None if longest >= workload.longest_request else
               say(LONGEST_DOES_NOT_FIT, longest=longest, reaches=workload.longest_request))
    return MemoryFit(weights, blocks, longest, problem)
