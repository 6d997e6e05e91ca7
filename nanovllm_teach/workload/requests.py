"""Workloads in time — who arrives when, with how long a prompt, wanting how many tokens — for the real or
the simulated engine (``workload/arrivals.py`` serves them). Pure Python, no torch; everything drawn from
one ``random.Random(seed)``.

A workload is a list of ``Request``: an arrival time in seconds (simulated seconds for the simulated
engine, wall-clock seconds for a real one), prompt token ids, and the output length the request will
have. It is built from three choices:

- arrivals: ``Poisson(rate)`` (independent users: exponential gaps, ``rate`` requests per second on
  average), ``Burst(size, every_s)`` (``size`` at once, every ``every_s`` seconds), ``Replay(times)`` (a
  recorded list), ``AtOnce()`` (everything at 0, as in nano-vllm's benchmark);
- lengths: ``Fixed(n)``, ``Uniform(lo, hi)``, ``LogNormal(median, sigma, lo, hi)``; ``sharegpt_prompt_lengths``
  and ``sharegpt_output_lengths`` are log-normals with the published mean lengths of ShareGPT requests as vLLM's
  serving benchmark sends them (see below);
- ``SharedPrefix(num_groups, prefix_len)``: every prompt starts with one of ``num_groups`` common prefixes
  (a system prompt, say), which the prefix cache can share.

``parse_lengths`` and ``parse_arrivals`` read them from command-line specs such as ``uniform:100:1024`` and
``poisson:8``.

Emits no events.
"""

from __future__ import annotations

import math
import random
from array import array
from dataclasses import dataclass
from typing import Protocol, Sequence

from nanovllm_teach.i18n import Text, say

NOT_POSITIVE = Text(en="{name} must be an int >= 1, got {value!r}", zh="{name} 必须是 >= 1 的 int，收到的是 {value!r}")
LO_ABOVE_HI = Text(en="{kind} needs lo <= hi, got lo={lo}, hi={hi}", zh="{kind} 要求 lo <= hi，收到的是 lo={lo}, hi={hi}")
LOGNORMAL_SHAPE = Text(en="LogNormal needs median > 0 and sigma >= 0, got {median!r}, {sigma!r}",
                       zh="LogNormal 要求 median > 0 且 sigma >= 0，收到的是 {median!r}, {sigma!r}")
LOGNORMAL_FIT = Text(en="fitting a LogNormal needs p90 > median > 0, got median={median}, p90={p90}",
                     zh="拟合 LogNormal 要求 p90 > median > 0，收到的是 median={median}, p90={p90}")
POISSON_RATE = Text(en="Poisson rate must be a number > 0 (requests per second), got {rate!r}",
                    zh="Poisson 的 rate 必须是 > 0 的数（每秒请求数），收到的是 {rate!r}")
BURST_EVERY = Text(en="Burst every_s must be a finite number >= 0, got {every_s!r}",
                   zh="Burst 的 every_s 必须是 >= 0 的有限数，收到的是 {every_s!r}")
REPLAY_ORDER = Text(en="Replay arrival times must be >= 0 and in increasing order",
                    zh="Replay 的到达时间必须 >= 0，并且按递增顺序排列")
REPLAY_COUNT = Text(en="Replay holds {held} arrival times, the workload asks for {asked}",
                    zh="Replay 里有 {held} 个到达时间，工作负载却要 {asked} 个")
SPAN_TOO_LONG = Text(en="{count} requests arriving as {arrivals} would take {span:.3g} s to arrive, more than the "
                        "{limit:.0e} s (116 days) a workload may span",
                     zh="{count} 个请求按 {arrivals} 到达需要 {span:.3g} 秒，超过了一个工作负载最多可跨越的 "
                        "{limit:.0e} 秒（116 天）")
LENGTH_SPEC_NOT_A_NUMBER = Text(en="length spec {spec!r} has a part that is not a number; use {forms}",
                                zh="长度规格 {spec!r} 中有一部分不是数字；可用的写法：{forms}")
ARRIVAL_SPEC_NOT_A_NUMBER = Text(en="arrival spec {spec!r} has a part that is not a number; use {forms}",
                                 zh="到达规格 {spec!r} 中有一部分不是数字；可用的写法：{forms}")
UNKNOWN_LENGTH_SPEC = Text(en="unknown length spec {spec!r}; use {forms}", zh="未知的长度规格 {spec!r}；可用的写法：{forms}")
UNKNOWN_ARRIVAL_SPEC = Text(en="unknown arrival spec {spec!r}; use {forms}", zh="未知的到达规格 {spec!r}；可用的写法：{forms}")


@dataclass(frozen=True)
class Request:
    """``output_len``: how many tokens the answer has (EOS comes after them). ``max_tokens``: the request's
    own limit (None: the answer's length), which a workload may set higher, as a chat client does."""

    arrival_s: float
    prompt_token_ids: list[int]
    output_len: int
    prefix_group: int | None = None
    max_tokens: int | None = None


class Lengths(Protocol):
    """A length distribution: ``sample`` draws one; ``mean`` and ``longest`` bound what a workload will hold."""

    def sample(self, rng: random.Random) -> int: ...

    def mean(self) -> float: ...

    @property
    def longest(self) -> int: ...


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(say(NOT_POSITIVE, name=name, value=value))
    return value


@dataclass(frozen=True)
class Fixed:
    n: int

    def __post_init__(self) -> None:
        _positive_int("Fixed length", self.n)

    def sample(self, rng: random.Random) -> int:
        return self.n

    def mean(self) -> float:
        return self.n

    @property
    def longest(self) -> int:
        return self.n


@dataclass(frozen=True)
class Uniform:
    """Every length in ``lo..hi`` (both included) equally likely, as ``random.randint``."""

    lo: int
    hi: int

    def __post_init__(self) -> None:
        _positive_int("Uniform lo", self.lo)
        if _positive_int("Uniform hi", self.hi) < self.lo:
            raise ValueError(say(LO_ABOVE_HI, kind="Uniform", lo=self.lo, hi=self.hi))

    def sample(self, rng: random.Random) -> int:
        return rng.randint(self.lo, self.hi)

    def mean(self) -> float:
        return (self.lo + self.hi) / 2

    @property
    def longest(self) -> int:
        return self.hi


# z of the 90th percentile of a standard normal: a log-normal's p90 is median * exp(Z90 * sigma).
Z90 = 1.2815515655446004


@dataclass(frozen=True)
class LogNormal:
    """Lengths whose logarithm is normal: most are near ``median``, a long tail reaches far above it
    (``sigma`` sets how far), clipped to ``lo..hi``."""

    median: float
    sigma: float
    lo: int = 1
    hi: int = 1_000_000

    def __post_init__(self) -> None:
        if not self.median > 0 or not self.sigma >= 0:
            raise ValueError(say(LOGNORMAL_SHAPE, median=self.median, sigma=self.sigma))
        if _positive_int("LogNormal hi", self.hi) < _positive_int("LogNormal lo", self.lo):
            raise ValueError(say(LO_ABOVE_HI, kind="LogNormal", lo=self.lo, hi=self.hi))

    @classmethod
    def fit(cls, median: float, p90: float, lo: int = 1, hi: int = 1_000_000) -> "LogNormal":
        """The log-normal with this median and 90th percentile."""
        if not p90 > median > 0:
            raise ValueError(say(LOGNORMAL_FIT, median=median, p90=p90))
        return cls(median, math.log(p90 / median) / Z90, lo, hi)

    def sample(self, rng: random.Random) -> int:
        value = round(rng.lognormvariate(math.log(self.median), self.sigma))
        return min(max(value, self.lo), self.hi)

    def mean(self) -> float:
        """The unclipped mean (``median * exp(sigma^2 / 2)``) within ``lo..hi``: an upper bound of the clipped
        one's when the median is below ``hi``."""
        return min(max(self.median * math.exp(min(self.sigma, 10.0) ** 2 / 2), self.lo), self.hi)

    @property
    def longest(self) -> int:
        return self.hi


# ShareGPT as vLLM's serving benchmark samples it (``--dataset-name sharegpt``): each request is a
# conversation's first turn as the prompt and its answer's length as the output, prompts of 4..1024 tokens and
# answers of at least 4 with prompt + answer <= 2048. Published figure: 1,000 such requests hold 229,711 prompt
# and 203,068 answer tokens with the Llama 3.1 tokenizer (vLLM pull request 18566,
# https://github.com/vllm-project/vllm/pull/18566: 230 and 203 tokens on average). Only the means are published;
# the spread is assumed (sigma = 1, a tenfold range between the 5th and 95th percentiles of a log-normal), and
# the medians are those whose clipped means (4..1024) are the published ones: 149 and 130.
SHAREGPT_SOURCE = Text(en="ShareGPT as vLLM's benchmark samples it: mean 230 prompt / 203 output tokens "
                          "(https://github.com/vllm-project/vllm/pull/18566), log-normal, sigma 1 assumed",
                       zh="按 vLLM 基准测试的采样方式取的 ShareGPT：平均 230 个 prompt token / 203 个输出 token"
                          "（https://github.com/vllm-project/vllm/pull/18566），对数正态分布，假定 sigma 为 1")


def sharegpt_prompt_lengths(lo: int = 4, hi: int = 1024) -> LogNormal:
    return LogNormal(149, 1.0, lo, hi)


def sharegpt_output_lengths(lo: int = 4, hi: int = 1024) -> LogNormal:
    return LogNormal(130, 1.0, lo, hi)


class Arrivals(Protocol):
    """When ``n`` requests arrive: ``times`` draws them; ``span_s`` is how long they take to arrive on
    average, known before any draw (``make_workload`` refuses a span longer than ``MAX_SPAN_S``)."""

    def times(self, n: int, rng: random.Random) -> list[float]: ...

    def span_s(self, n: int) -> float: ...


# The longest stretch of arrivals a workload may have: 10 million seconds (116 days). Far beyond any serving
# benchmark, and short enough that float seconds still resolve a nanosecond at its end (a span of 1e300 s
# would make every step last 0 s).
MAX_SPAN_S = 1e7


@dataclass(frozen=True)
class Poisson:
    rate: float  # requests per second

    def __post_init__(self) -> None:
        if isinstance(self.rate, bool) or not isinstance(self.rate, (int, float)) or not 0 < self.rate < math.inf:
            raise ValueError(say(POISSON_RATE, rate=self.rate))

    def times(self, n: int, rng: random.Random) -> list[float]:
        t, out = 0.0, []
        for _ in range(n):
            t += rng.expovariate(self.rate)
            out.append(t)
        return out

    def span_s(self, n: int) -> float:
        return n / self.rate


@dataclass(frozen=True)
class Burst:
    size: int
    every_s: float

    def __post_init__(self) -> None:
        _positive_int("Burst size", self.size)
        if not 0 <= self.every_s < math.inf:
            raise ValueError(say(BURST_EVERY, every_s=self.every_s))

    def times(self, n: int, rng: random.Random) -> list[float]:
        return [(i // self.size) * self.every_s for i in range(n)]

    def span_s(self, n: int) -> float:
        return (n - 1) // self.size * self.every_s


@dataclass(frozen=True)
class AtOnce:
    def times(self, n: int, rng: random.Random) -> list[float]:
        return [0.0] * n

    def span_s(self, n: int) -> float:
        return 0.0


@dataclass(frozen=True)
class Replay:
    """Arrival times recorded elsewhere (seconds, in order)."""

    arrival_s: Sequence[float]

    def __post_init__(self) -> None:
        times = list(self.arrival_s)
        if any(not t >= 0 for t in times) or times != sorted(times):
            raise ValueError(say(REPLAY_ORDER))

    def times(self, n: int, rng: random.Random) -> list[float]:
        if n != len(self.arrival_s):
            raise ValueError(say(REPLAY_COUNT, held=len(self.arrival_s), asked=n))
        return list(self.arrival_s)

    def span_s(self, n: int) -> float:
        return self.arrival_s[-1] if len(self.arrival_s) else 0.0


@dataclass(frozen=True)
class SharedPrefix:
    num_groups: int
    prefix_len: int

    def __post_init__(self) -> None:
        _positive_int("SharedPrefix num_groups", self.num_groups)
        _positive_int("SharedPrefix prefix_len", self.prefix_len)


def _token_ids(rng: random.Random, pool: list[int], k: int) -> list[int]:
    """``k`` random token ids from ``pool``. The ids are the pool's own int objects, so a long workload's
    prompts share them instead of holding millions of separate ints; ``randbytes`` draws them in one call
    (the modulo's bias, under 1e-4 for a 150k vocabulary, does not matter for placeholder prompts)."""
    draws = array("I")
    draws.frombytes(rng.randbytes(draws.itemsize * k))
    n = len(pool)
    return [pool[x % n] for x in draws]


def make_workload(num_requests: int, arrivals: Arrivals, prompt_lens: Lengths, output_lens: Lengths, *,
                  vocab_size: int, seed: int = 0, shared_prefix: SharedPrefix | None = None) -> list[Request]:
    """``num_requests`` requests in arrival order. Prompt ids are random in ``[0, vocab_size)``, so two
    prompts share cached blocks only through ``shared_prefix``; its prefix comes before the sampled
    prompt length (a request's prompt is ``prefix_len`` + that many tokens)."""
    _positive_int("num_requests", num_requests)
    _positive_int("vocab_size", vocab_size)
    span = arrivals.span_s(num_requests)
    if not span <= MAX_SPAN_S:
        raise ValueError(say(SPAN_TOO_LONG, count=num_requests, arrivals=arrivals, span=span, limit=MAX_SPAN_S))
    rng = random.Random(seed)
    pool = list(range(vocab_size))
    prefixes = ([_token_ids(rng, pool, shared_prefix.prefix_len) for _ in range(shared_prefix.num_groups)]
                if shared_prefix is not None else [])
    requests = []
    for arrival_s in arrivals.times(num_requests, rng):
        group = rng.randrange(len(prefixes)) if prefixes else None
        prompt = (prefixes[group] if group is not None else []) + _token_ids(rng, pool, prompt_lens.sample(rng))
        requests.append(Request(arrival_s, prompt, output_lens.sample(rng), group))
    return requests


_LENGTH_SPECS = "fixed:N, uniform:LO:HI, lognormal:MEDIAN:P90, sharegpt-prompt, sharegpt-output"
_ARRIVAL_SPECS = "poisson:RATE, burst:SIZE:EVERY_S, at-once"  # forms, not words: both languages show them as they are


def _numbers(spec: str, refusal: Text, forms: str, cast: type) -> tuple[str, list]:
    name, *args = spec.split(":")
    try:
        return name, [cast(a) for a in args]
    except ValueError:
        raise ValueError(say(refusal, spec=spec, forms=forms)) from None


def parse_lengths(spec: str, hi: int = 1_000_000) -> Lengths:
    """A length distribution from a command-line spec (``uniform:100:1024``; forms in ``_LENGTH_SPECS``).
    ``hi`` clips the log-normals' long tails (a chat prompt of 50,000 tokens fits no ``max_model_len``)."""
    name, numbers = _numbers(spec, LENGTH_SPEC_NOT_A_NUMBER, _LENGTH_SPECS, int)
    makers = {("fixed", 1): Fixed, ("uniform", 2): Uniform, ("lognormal", 2): lambda m, p: LogNormal.fit(m, p, hi=hi),
              ("sharegpt-prompt", 0): lambda: sharegpt_prompt_lengths(hi=min(1024, hi)),
              ("sharegpt-output", 0): lambda: sharegpt_output_lengths(hi=min(1024, hi))}
    maker = makers.get((name, len(numbers)))
    if maker is None:
        raise ValueError(say(UNKNOWN_LENGTH_SPEC, spec=spec, forms=_LENGTH_SPECS))
    return maker(*numbers)


def parse_arrivals(spec: str) -> Arrivals:
    """Arrivals from a command-line spec (``poisson:8``; forms in ``_ARRIVAL_SPECS``)."""
    name, numbers = _numbers(spec, ARRIVAL_SPEC_NOT_A_NUMBER, _ARRIVAL_SPECS, float)
    if name == "poisson" and len(numbers) == 1:
        return Poisson(numbers[0])
    if name == "burst" and len(numbers) == 2 and numbers[0].is_integer():
        return Burst(int(numbers[0]), numbers[1])
    if name == "at-once" and not numbers:
        return AtOnce()
    raise ValueError(say(UNKNOWN_ARRIVAL_SPEC, spec=spec, forms=_ARRIVAL_SPECS))
