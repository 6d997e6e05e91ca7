"""A recorded workload for the planner: the arrivals and lengths of a TEACHING trace's requests (orchestration,
beside ``plan/probes.py``, reading the trace layer below it).

``plan --workload-trace FILE`` serves, in every probe, the requests a trace recorded rather than lengths drawn
from a distribution: each request's prompt length and answer length (the tokens it was given), arriving with the
trace's own gaps, stretched or squeezed to the probe's rate (the gaps times the trace's mean rate over the
probe's), so its bursts and lulls stay in proportion. A probe of more requests than the trace holds serves it
again from the start, the next round one mean gap after the last arrival. The saturation probe sends them all
at once, as it does any workload.

The file is someone else's: it is refused, naming it, when it is larger than ``MAX_TRACE_BYTES``, is not a
trace (``load_trace``'s checks of every line), or holds fewer than two finished requests or no time between
its first and last arrival (no rate to scale); aborted and unfinished requests are left out (their answers'
lengths are not known).

Emits no events.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from nanovllm_teach.i18n import say
from nanovllm_teach.plan.messages import (TRACE_DAMAGED, TRACE_NO_RATE, TRACE_NOT_A_RUN, TRACE_TOO_FEW_REQUESTS,
                                          TRACE_TOO_LARGE, TRACE_UNREADABLE)
from nanovllm_teach.workload.requests import Request

MAX_TRACE_BYTES = 256 * 2**20  # a 10,000-request simulated run's trace is about 30 MiB


@dataclass(frozen=True)
class RecordedRequests:
    """A trace's finished requests in arrival order: the gaps between arrivals (seconds), the prompt and the
    answer lengths (tokens); ``source``: the file's name, for the log and the tables."""

    source: str
    gaps_s: tuple[float, ...]
    prompt_lens: tuple[int, ...]
    output_lens: tuple[int, ...]

    def __post_init__(self) -> None:
        n = len(self.prompt_lens)
        assert len(self.output_lens) == n and len(self.gaps_s) == n - 1, "one gap between each two requests"

    @property
    def mean_rate(self) -> float:
        """Requests per second over the recorded span."""
        return len(self.gaps_s) / sum(self.gaps_s)

    @property
    def longest_request(self) -> int:
        return max(p + o for p, o in zip(self.prompt_lens, self.output_lens))

    def requests(self, n: int, rate: float | None, vocab_size: int, seed: int) -> list[Request]:
        """``n`` requests at ``rate`` requests/s (None: all at once), the recording's in order and again from
        its start; prompt ids drawn from ``random.Random(seed)``, as ``make_workload`` draws them."""
        rng = random.Random(seed)
        stretch = 0.0 if rate is None else self.mean_rate / rate
        mean_gap = sum(self.gaps_s) / len(self.gaps_s)
        out, t = [], 0.0
        for i in range(n):
            k = i % len(self.prompt_lens)
            if i:
                t += stretch * (self.gaps_s[k - 1] if k else mean_gap)
            prompt = [rng.randrange(vocab_size) for _ in range(self.prompt_lens[k])]
            out.append(Request(t, prompt, self.output_lens[k]))
        return out


def read_recorded_requests(path: str | Path) -> RecordedRequests:
    """The finished requests of the trace at ``path``; a ``ValueError`` naming the file for anything else."""
    from nanovllm_teach.trace.reader import load_trace  # msgspec and the trace tables: only when a trace is read

    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as error:
        raise ValueError(say(TRACE_UNREADABLE, path=path, why=error.strerror or error)) from None
    if size > MAX_TRACE_BYTES:
        raise ValueError(say(TRACE_TOO_LARGE, path=path, size=size, most=MAX_TRACE_BYTES))
    try:
        rows = load_trace(path).requests
    except ValueError as error:  # TraceFormatError, naming the line
        raise ValueError(say(TRACE_DAMAGED, why=str(error).splitlines()[0])) from None
    except Exception as error:  # a file that parses yet whose events contradict each other
        raise ValueError(say(TRACE_NOT_A_RUN, path=path, kind=type(error).__name__)) from None
    done = sorted((r for r in rows if r.finish_reason not in (None, "aborted") and r.num_completion_tokens >= 1
                   and r.prompt_len >= 1), key=lambda r: (r.arrival_t_ns, r.seq_id))
    if len(done) < 2:
        raise ValueError(say(TRACE_TOO_FEW_REQUESTS, path=path, count=len(done)))
    gaps = tuple((b.arrival_t_ns - a.arrival_t_ns) / 1e9 for a, b in zip(done, done[1:]))
    if not sum(gaps) > 0:
        raise ValueError(say(TRACE_NO_RATE, path=path))
    return RecordedRequests(path.name, gaps, tuple(r.prompt_len for r in done),
                            tuple(r.num_completion_tokens for r in done))
