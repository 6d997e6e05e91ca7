"""What a workload run measures — each request's arrival, first-token and finish times, and the serving
figures made of them (throughput, TTFT, TPOT, steps by bound, goodput against an SLO). Pure Python.

``serve_workload`` (``workload/arrivals.py``) fills a ``WorkloadResult`` as it runs, on the clock the engine
runs on: simulated seconds for ``runner="simulated"``, wall-clock seconds for the real engine. The same figures can be read
from the run's trace; this is the way that needs none (a 10,000-request run can keep its trace off).

Goodput is the number of requests per second that met a service-level objective (``Slo``: a limit on TTFT
and one on TPOT), in the sense of vLLM's serving benchmark and of DistServe. ``Slo.meets`` is its one
definition: ``WorkloadResult.goodput`` uses it, and so does notebook 03 on a trace's request rows.

Emits no events.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass, field

from nanovllm_teach.i18n import Text, say

SLO_LIMIT = Text(en="Slo.{name} must be a positive, finite number of milliseconds, got {value!r}",
                 zh="Slo.{name} 必须是正的有限毫秒数，收到的是 {value!r}")
NOT_AN_SLO = Text(en="slo must be an Slo, got {kind}", zh="slo 必须是 Slo，收到的是 {kind}")
NO_VALUES = Text(en="percentile of no values", zh="没有数值，无法求百分位数")
SUMMARY_STEPS = Text(en="{duration_s:.1f} s, {steps} steps ({prefill_steps} prefill; by bound: {bounds}), "
                        "{preemptions} preemptions",
                     zh="{duration_s:.1f} 秒，{steps} 步（其中预填充 {prefill_steps} 步；按瓶颈：{bounds}），"
                        "抢占 {preemptions} 次")
NOT_PREDICTED = Text(en="not predicted", zh="未预测")
SUMMARY_OUTPUT = Text(en="output {tokens} tokens, {tok_s:.0f} tok/s", zh="输出 {tokens} 个 token，{tok_s:.0f} tok/s")
SUMMARY_TTFT = Text(en="; TTFT (from arrival) p50 {p50_ms:.0f} ms, p99 {p99_ms:.0f} ms",
                    zh="；首 token 延迟 TTFT（从到达算起）p50 {p50_ms:.0f} ms，p99 {p99_ms:.0f} ms")
SUMMARY_TPOT = Text(en="; TPOT p50 {p50_ms:.1f} ms", zh="；每个输出 token 的时间 TPOT p50 {p50_ms:.1f} ms")


@dataclass(frozen=True)
class Slo:
    """A service-level objective for one request: its first token within ``ttft_ms`` of its arrival, and
    its later tokens ``tpot_ms`` or less apart on average (both limits in milliseconds)."""

    ttft_ms: float
    tpot_ms: float

    def __post_init__(self) -> None:
        for name in ("ttft_ms", "tpot_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(say(SLO_LIMIT, name=name, value=value))

    def meets(self, ttft_ms: float | None, tpot_ms: float | None, finished: bool) -> bool:
        """Whether a request met both limits. An unfinished request has not met them (its TPOT is not known
        yet); a finished one-token answer has no gap between tokens, so only its TTFT is held to a limit."""
        if not finished or ttft_ms is None:
            return False
        return ttft_ms <= self.ttft_ms and (tpot_ms is None or tpot_ms <= self.tpot_ms)


@dataclass
class RequestTimes:
    arrival_s: float
    num_prompt_tokens: int
    first_token_s: float | None = None
    finish_s: float | None = None
    num_output_tokens: int = 0
    finish_reason: str | None = None

    @property
    def ttft_s(self) -> float | None:
        """Time to first token: from arrival to the end of the step that produced it."""
        return None if self.first_token_s is None else self.first_token_s - self.arrival_s

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first (None for one-token answers)."""
        if self.finish_s is None or self.first_token_s is None or self.num_output_tokens < 2:
            return None
        return (self.finish_s - self.first_token_s) / (self.num_output_tokens - 1)

    def meets(self, slo: Slo) -> bool:
        """Whether this request met ``slo`` (``Slo.meets``, on this request's times in milliseconds)."""
        ttft, tpot = self.ttft_s, self.tpot_s
        return slo.meets(None if ttft is None else ttft * 1e3, None if tpot is None else tpot * 1e3,
                         finished=self.finish_s is not None)


@dataclass
class WorkloadResult:
    duration_s: float = 0.0  # from the first arrival to the last token
    num_steps: int = 0
    num_prefill_steps: int = 0
    steps_by_bound: Counter = field(default_factory=Counter)  # simulated runs only
    requests: dict[int, RequestTimes] = field(default_factory=dict)  # by seq_id
    num_preemptions: int = 0

    def add_step(self, seqs: list, is_prefill: bool, now_s: float, bound: str | None) -> None:
        """One engine step ended at ``now_s`` with the batch ``seqs`` (``Sequence`` objects)."""
        self.num_steps += 1
        self.num_prefill_steps += is_prefill
        if bound is not None:
            self.steps_by_bound[bound] += 1
        for seq in seqs:
            times = self.requests[seq.seq_id]
            if seq.num_completion_tokens > times.num_output_tokens:
                times.num_output_tokens = seq.num_completion_tokens
                if times.first_token_s is None:
                    times.first_token_s = now_s
            if seq.is_finished:
                times.finish_s, times.finish_reason = now_s, seq.finish_reason

    @property
    def output_tokens(self) -> int:
        return sum(r.num_output_tokens for r in self.requests.values())

    @property
    def output_tokens_per_s(self) -> float:
        return self.output_tokens / self.duration_s if self.duration_s > 0 else 0.0

    def goodput(self, slo: Slo) -> float:
        """Requests per second that met ``slo``, over the run's duration (0.0 for a run of no duration)."""
        if not isinstance(slo, Slo):
            raise TypeError(say(NOT_AN_SLO, kind=type(slo).__name__))
        met = sum(times.meets(slo) for times in self.requests.values())
        return met / self.duration_s if self.duration_s > 0 else 0.0

    def summary(self) -> str:
        """Two lines: duration, steps and bounds; throughput, TTFT p50/p99, TPOT p50."""
        ttft = [r.ttft_s for r in self.requests.values() if r.ttft_s is not None]
        tpot = [r.tpot_s for r in self.requests.values() if r.tpot_s is not None]
        bounds = ", ".join(f"{k} {v}" for k, v in sorted(self.steps_by_bound.items())) or say(NOT_PREDICTED)
        line2 = say(SUMMARY_OUTPUT, tokens=self.output_tokens, tok_s=self.output_tokens_per_s)
        if ttft:
            line2 += say(SUMMARY_TTFT, p50_ms=percentile(ttft, 0.5) * 1e3, p99_ms=percentile(ttft, 0.99) * 1e3)
        if tpot:
            line2 += say(SUMMARY_TPOT, p50_ms=statistics.median(tpot) * 1e3)
        line1 = say(SUMMARY_STEPS, duration_s=self.duration_s, steps=self.num_steps,
                    prefill_steps=self.num_prefill_steps, bounds=bounds, preemptions=self.num_preemptions)
        return f"{line1}\n  {line2}"


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1): the sorted values' entry at index ``int(q * n)`` (the largest for q = 1), so
    always a value that occurred; for a median of an even count, the upper of the middle two."""
    if not values:
        raise ValueError(say(NO_VALUES))
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
