"""The deployment planner's pieces, one engine configuration at a time (orchestration, above ``LLM``).

The question a planner asks: which GPU, tensor-parallel degree, replica count and batch limits serve a workload
at a target rate within a latency SLO, at the lowest cost. Vidur's answer (Agrawal et al., "Vidur: A Large-Scale
Simulation Framework for LLM Inference", MLSys 2024: Vidur-Search) is the one taken here: for every
configuration, a search over request rates finds the highest rate it *sustains*, each probe a simulated run.

- ``Candidate``: the engine settings a search is run for (GPU, ``tensor_parallel_size``, ``max_num_seqs``,
  ``max_num_batched_tokens``). Replicas need no search of their own: arrivals split at random over R identical
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
- ``next_rate``: the search, as a pure function of the probes so far: first the saturation probe (``None``), then
  ``steps`` bisections of ``[0, HEADROOM x saturated rate]``; ``sustained_rate`` is the highest rate that passed.
  Each probe depends on the ones before it only through this function, so the search gives the same answer
  however its probes are scheduled (``plan/search.py``: in this process or on Ray).
- ``memory_fit``: what a configuration holds before anything runs (``sim/budget.py``): weights and KV blocks per
  GPU, the longest request that fits.

Emits no events (the simulated engines it runs emit theirs, to no recorder).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import asdict, dataclass

from nanovllm_teach.sim.budget import estimated_kv_blocks, weight_bytes
from nanovllm_teach.sim.cost_model import StepCostModel, load_shape
from nanovllm_teach.sim.hardware import CPU_DEVICE_NAME, DEVICES, GIB
from nanovllm_teach.workload.metrics import Slo, percentile
from nanovllm_teach.workload.requests import AtOnce, Lengths, Poisson, make_workload, parse_lengths

# The first bracket's top, as a multiple of the rate the engine completes with every request there at once:
# a drained burst ends with a shrinking batch, so a steady stream can be sustained a little above it.
HEADROOM = 1.25
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

    @property
    def key(self) -> str:
        return (f"{self.hardware}/tp{self.tensor_parallel_size}/seqs{self.max_num_seqs}/"
                f"tokens{self.max_num_batched_tokens}")


@dataclass(frozen=True)
class PlanWorkload:
    """What every probe serves (the lengths as ``simulate``'s ``--prompt-lens``/``--output-lens`` forms)."""

    model: str
    prompt_lens: str = "sharegpt-prompt"
    output_lens: str = "sharegpt-output"
    max_model_len: int = 8192
    warmup_requests: int = 200
    probe_requests: int = MIN_PROBE_REQUESTS
    seed: int = 0

    def __post_init__(self) -> None:
        for name, least in (("max_model_len", 1), ("warmup_requests", 0), ("probe_requests", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"{name} must be an int >= {least}, got {value!r}")
        if self.probe_requests < MIN_PROBE_REQUESTS:
            raise ValueError(f"a probe measures at least {MIN_PROBE_REQUESTS} requests (fewer give a p99 of a "
                             f"handful), got {self.probe_requests}")
        self.lengths()  # refuses a bad form now, naming it

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
            raise ValueError(f"prompts of up to {prompts.longest} and answers of up to {outputs.longest} tokens do "
                             f"not fit max_model_len={self.max_model_len}")
        return prompts, outputs

    @property
    def longest_request(self) -> int:
        prompts, outputs = self.lengths()
        return prompts.longest + outputs.longest


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
                raise ValueError(f"{name} must be one of {', '.join(QUANTILES)}, got {getattr(self, name)!r}")
        if self.goodput is not None and not (isinstance(self.goodput, float) and 0 < self.goodput <= 1):
            raise ValueError(f"goodput must be a share of requests in (0, 1], got {self.goodput!r}")

    def describe(self) -> str:
        if self.goodput is not None:
            return (f"{self.goodput:.0%} of requests with TTFT <= {self.ttft_ms:g} ms and TPOT <= "
                    f"{self.tpot_ms:g} ms")
        return (f"TTFT {self.ttft_quantile} <= {self.ttft_ms:g} ms, TPOT {self.tpot_quantile} <= "
                f"{self.tpot_ms:g} ms")


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
              max_num_batched_tokens=candidate.max_num_batched_tokens, max_model_len=workload.max_model_len)
    prompts, outputs = workload.lengths()
    requests = make_workload(workload.num_requests, AtOnce() if rate is None else Poisson(rate), prompts, outputs,
                             vocab_size=load_shape(workload.model).vocab_size, seed=workload.seed)
    try:
        result = serve_workload(llm, requests, answers=llm.answers, frontend_s=llm.frontend_s)
    finally:
        llm.close()
    times = sorted(result.requests.values(), key=lambda t: t.arrival_s)
    measured = times[workload.warmup_requests:]
    ttft = [t.ttft_s * 1e3 for t in measured]
    # One-token answers have no time between tokens: a probe of only those holds TPOT to nothing.
    tpot = [t.tpot_s * 1e3 for t in measured if t.tpot_s is not None] or [0.0]
    slo = Slo(objective.ttft_ms, objective.tpot_ms)
    good = sum(t.meets(slo) for t in measured) / len(measured)
    in_system_first, in_system_last = _in_system(times, measured)
    if objective.goodput is not None:
        met = good >= objective.goodput
    else:
        met = (percentile(ttft, QUANTILES[objective.ttft_quantile]) <= objective.ttft_ms
               and percentile(tpot, QUANTILES[objective.tpot_quantile]) <= objective.tpot_ms)
    growing = in_system_last > QUEUE_GROWTH * in_system_first + QUEUE_SLACK
    return Probe(rate, met and not growing, *(_round(percentile(v, q)) for v, q in
                                              ((ttft, 0.5), (ttft, 0.99), (tpot, 0.5), (tpot, 0.99))),
                 _round(good), _round(in_system_first), _round(in_system_last),
                 _round(len(times) / result.duration_s), _round(result.output_tokens_per_s))


def _in_system(everyone: list, measured: list) -> tuple[float, float]:
    """Mean requests that had arrived and not finished, at each arrival of the first and of the last quarter of
    the measured requests."""
    arrivals = [t.arrival_s for t in everyone]
    finishes = sorted(t.finish_s for t in everyone)

    def mean_in_system(part: list) -> float:
        return sum(bisect_right(arrivals, t.arrival_s) - bisect_right(finishes, t.arrival_s) for t in part) / len(part)

    quarter = max(1, len(measured) // 4)
    return mean_in_system(measured[:quarter]), mean_in_system(measured[-quarter:])


def next_rate(probes: list[Probe], steps: int) -> float | None | bool:
    """The rate of the search's next probe: None for the saturation probe (first), a rate, or False when the
    search is done."""
    if not probes:
        return None
    if len(probes) > steps:
        return False
    lo, hi = _bracket(probes)
    return float(f"{(lo + hi) / 2:.4g}")  # four digits: a rate a command line can repeat


def _bracket(probes: list[Probe]) -> tuple[float, float]:
    lo, hi = 0.0, HEADROOM * probes[0].requests_per_s
    for p in probes[1:]:
        if p.passed:
            lo = max(lo, p.rate)
        else:
            hi = min(hi, p.rate)
    return lo, hi


def sustained_rate(probes: list[Probe]) -> float:
    """The highest rate that passed (0.0: none did)."""
    return max((p.rate for p in probes[1:] if p.passed), default=0.0)


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
        raise ValueError(f"plan needs a datasheet GPU ({', '.join(DEVICES)}), got {candidate.hardware!r}: this-cpu "
                         f"is measured, and would differ from one machine of a cluster to the next")
    shape = load_shape(workload.model)
    shape.check_tensor_parallel(candidate.tensor_parallel_size)
    cost_model = StepCostModel(shape, DEVICES[candidate.hardware], tensor_parallel_size=candidate.tensor_parallel_size)
    weights = weight_bytes(cost_model) / GIB
    max_len = min(workload.max_model_len, shape.max_position_embeddings)
    try:
        blocks = estimated_kv_blocks(cost_model, gpu_memory_utilization, max_len,
                                     candidate.max_num_batched_tokens, candidate.max_num_seqs, block_size)
    except ValueError as error:
        return MemoryFit(weights, 0, 0, str(error).split(":")[0])
    longest = min(max_len, blocks * block_size)
    problem = (None if longest >= workload.longest_request else
               f"its longest request fits {longest} tokens, the workload's reaches {workload.longest_request}")
    return MemoryFit(weights, blocks, longest, problem)


def search_steps(resolution: float) -> int:
    """Bisections that narrow ``[0, HEADROOM x saturated rate]`` to ``resolution`` of the saturated rate."""
    if not 0 < resolution < 1:
        raise ValueError(f"resolution must be a share of the saturated rate in (0, 1), got {resolution!r}")
    return max(1, math.ceil(math.log2(HEADROOM / resolution)))
