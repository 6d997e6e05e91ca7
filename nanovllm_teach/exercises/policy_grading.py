"""Grading the open-ended exercise: a scheduling policy, judged by what it does to latency, not by its trace.

The student's ``choose_next`` replaces the engine's (exercise point ``choose_next``) in a grading child,
exactly as the other engine exercises are run (``engine_grading``), on the timed workloads of
``policy_workloads``; the reference is the untouched engine, whose policy is first come, first served
(FCFS). Every number is read off the two traces (``measure``). On every workload, both must hold:

- **faster**: the mean time to first token (TTFT) is at least 20% below FCFS's (``MEAN_TTFT_RATIO``);
- **nobody starves**: no request waits longer for its first token than 1.5 times FCFS's slowest request
  (``MAX_TTFT_RATIO``). A policy may reorder who waits, but a request overtaken forever fails this;

and every request must finish. TTFT is as the trace measures it: from the step boundary at which the
request joined the queue to the end of the step that produced its first token, in simulated time. The
verdict is a table per workload, FCFS against the student's policy (mean, p99 and max TTFT, mean time per
output token, output tokens per second), with each check and why it failed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean
from typing import Any

from nanovllm_teach.exercises.base import GradeResult, not_implemented
from nanovllm_teach.exercises.engine_grading import EngineExercise, run_failure
from nanovllm_teach.exercises.policy_workloads import TimedWorkload
from nanovllm_teach.exercises.sandbox import ChildEnd
from nanovllm_teach.exercises.verdict import failure_sentence, load_run, where_it_stopped
from nanovllm_teach.workload.metrics import percentile
from nanovllm_teach.trace.reader import Trace

MEAN_TTFT_RATIO = 0.8  # the policy's mean TTFT may be at most this share of FCFS's
MAX_TTFT_RATIO = 1.5  # no request's TTFT may exceed this multiple of FCFS's slowest request


@dataclass(frozen=True)
class PolicyMetrics:
    """What one run of a timed workload measured (milliseconds of simulated time)."""

    num_requests: int
    num_finished: int
    mean_ttft_ms: float
    p99_ttft_ms: float
    max_ttft_ms: float
    slowest_seq: int  # the request whose TTFT is max_ttft_ms
    slowest_prompt_len: int
    mean_tpot_ms: float | None
    tokens_per_s: float


def measure(trace: Trace) -> PolicyMetrics:
    """The metrics of one run, from its trace alone (requests that never got a token count as unfinished)."""
    served = [r for r in trace.requests if r.ttft_ms is not None]
    if not served:
        raise ValueError(f"trace {trace.path or '(in memory)'} has no request that got a first token")
    slowest = max(served, key=lambda r: r.ttft_ms)
    ttft = [r.ttft_ms for r in served]
    tpot = [r.tpot_ms for r in served if r.tpot_ms is not None]
    rows = trace.steps
    wall_s = (rows[-1].t_end_ns - rows[0].t_start_ns) / 1e9
    tokens = sum(r.num_completion_tokens for r in trace.requests)
    return PolicyMetrics(
        num_requests=len(trace.requests), num_finished=sum(r.finish_reason is not None for r in trace.requests),
        mean_ttft_ms=mean(ttft), p99_ttft_ms=percentile(ttft, 0.99), max_ttft_ms=slowest.ttft_ms,
        slowest_seq=slowest.seq_id, slowest_prompt_len=slowest.prompt_len,
        mean_tpot_ms=mean(tpot) if tpot else None, tokens_per_s=tokens / wall_s if wall_s > 0 else 0.0)


@dataclass(frozen=True)
class WorkloadScore:
    """One workload's result: FCFS's run against the policy's, and the two checks."""

    workload: TimedWorkload
    fcfs: PolicyMetrics
    yours: PolicyMetrics

    @property
    def mean_ratio(self) -> float:
        return self.yours.mean_ttft_ms / self.fcfs.mean_ttft_ms

    @property
    def max_ratio(self) -> float:
        return self.yours.max_ttft_ms / self.fcfs.max_ttft_ms

    @property
    def finished(self) -> bool:
        return self.yours.num_finished == self.yours.num_requests == self.fcfs.num_requests

    @property
    def faster(self) -> bool:
        return self.mean_ratio <= MEAN_TTFT_RATIO

    @property
    def fair(self) -> bool:
        return self.max_ratio <= MAX_TTFT_RATIO

    @property
    def passed(self) -> bool:
        return self.finished and self.faster and self.fair

    def problems(self) -> list[str]:
        """Why the workload fails, one sentence per check that does (empty when it passes)."""
        out: list[str] = []
        y, f = self.yours, self.fcfs
        if not self.finished:
            out.append(f"only {y.num_finished} of {f.num_requests} requests finished")
        if not self.faster:
            out.append(f"mean TTFT {y.mean_ttft_ms:.1f} ms is {_change(self.mean_ratio)} FCFS's "
                       f"{f.mean_ttft_ms:.1f} ms; it must be at least {1 - MEAN_TTFT_RATIO:.0%} lower")
        if not self.fair:
            out.append(f"seq {y.slowest_seq} (a {y.slowest_prompt_len}-token prompt) waited {y.max_ttft_ms:.1f} ms "
                       f"for its first token, {self.max_ratio:.2f}x FCFS's slowest request ({f.max_ttft_ms:.1f} "
                       f"ms); more than {MAX_TTFT_RATIO:g}x is starvation: it was passed over while others went "
                       f"ahead")
        return out


def _change(ratio: float) -> str:
    if ratio < 1:
        return f"{1 - ratio:.0%} below"
    return f"{ratio - 1:.0%} above" if ratio > 1 else "the same as"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def leaderboard(scores: list[WorkloadScore]) -> str:
    """Per workload, FCFS and the policy side by side, with both checks, as a fixed-width table."""
    head = ["workload", "policy", "mean TTFT", "p99 TTFT", "max TTFT", "mean TPOT", "tokens/s",
            f"mean <= {MEAN_TTFT_RATIO:g}x FCFS", f"max <= {MAX_TTFT_RATIO:g}x FCFS max"]
    table = [head, ["", "", "(ms)", "(ms)", "(ms)", "(ms)", "", "", ""]]
    for s in scores:
        for label, m in (("FCFS", s.fcfs), ("yours", s.yours)):
            checks = ["", ""] if label == "FCFS" else [
                f"{'yes' if s.faster else 'NO'} ({s.mean_ratio:.2f}x)", f"{'yes' if s.fair else 'NO'} ({s.max_ratio:.2f}x)"]
            table.append([s.workload.name if label == "FCFS" else "", label, _ms(m.mean_ttft_ms), _ms(m.p99_ttft_ms),
                          _ms(m.max_ttft_ms), _ms(m.mean_tpot_ms), f"{m.tokens_per_s:.0f}", *checks])
    widths = [max(len(row[c]) for row in table) for c in range(len(head))]
    return "\n".join("  ".join(cell.ljust(w) if c < 2 else cell.rjust(w)
                               for c, (cell, w) in enumerate(zip(row, widths))).rstrip() for row in table)


@dataclass
class PolicyGradeResult(GradeResult):
    """A scheduling-policy verdict: ``scores`` per workload, ``table`` (the leaderboard), and ``traces``:
    per workload, FCFS's trace and the policy's (for ``viz.compare``)."""

    scores: list[WorkloadScore] = field(default_factory=list)
    table: str = ""
    traces: dict[str, tuple[Trace, Trace]] = field(default_factory=dict)


@dataclass(frozen=True)
class PolicyExercise(EngineExercise):
    """An engine exercise graded by the metrics of its runs against FCFS's, not by trace equality."""

    def _verdict(self, end: ChildEnd, outcome: dict[str, Any], folder: Path, references: dict) -> GradeResult:
        unusable = self._unusable(end, outcome)
        if unusable is not None:
            return unusable
        scores: list[WorkloadScore] = []
        traces: dict[str, tuple[Trace, Trace]] = {}
        for workload in self.workloads:
            failure = run_failure(end, outcome, workload.name)
            run = load_run(folder / f"{workload.name}.jsonl")
            if failure is not None and failure.get("not_implemented"):
                return not_implemented(self, failure["function"])
            if failure is not None or run is None:
                sentence = failure_sentence(failure or {"type": "no trace", "message": "", "function": None},
                                            where_it_stopped(run))
                return self.fail(f"workload {workload.name!r} ({workload.description}):\n  {sentence}", workload.name)
            fcfs = references[workload.name]
            scores.append(WorkloadScore(workload, measure(fcfs), measure(run)))
            traces[workload.name] = (fcfs, run)
        table = leaderboard(scores)
        failing = [s for s in scores if not s.passed]
        if failing:
            lines = [f"  {s.workload.name}: {problem}" for s in failing for problem in s.problems()]
            message = (f"FAIL {self.name}: your policy does not pass {len(failing)} of {len(scores)} workloads\n"
                       + "\n".join(lines) + "\n\n" + table)
            return PolicyGradeResult(self.name, False, message, failing[0].workload.name, None, scores, table, traces)
        cuts = ", ".join(f"{1 - s.mean_ratio:.0%}" for s in scores)
        message = (f"PASS {self.name}: against FCFS your policy cut the mean TTFT by {cuts} and kept every request "
                   f"within {MAX_TTFT_RATIO:g}x FCFS's slowest, on all {len(scores)} workloads\n\n{table}")
        return PolicyGradeResult(self.name, True, message, None, None, scores, table, traces)
