"""Grading the open-ended exercise: a scheduling policy, judged by what it does to latency, not by its trace.

The student's ``choose_next`` replaces the engine's (exercise point ``choose_next``) in a grading child,
exactly as the other engine exercises are run (``engine_grading``), on the timed workloads of
``workloads.py`` beside it; the reference is the untouched engine, whose policy is first come, first served
(FCFS). Every number is read off the two traces (``measure``). On every workload, both must hold:

- **faster**: the mean time to first token (TTFT) is at least 20% below FCFS's (``MEAN_TTFT_RATIO``);
- **nobody starves**: no request waits longer for its first token than 1.5 times FCFS's slowest request
  (``MAX_TTFT_RATIO``). A policy may reorder who waits, but a request overtaken forever fails this;

and every request must finish. TTFT is as the trace measures it: from the step boundary at which the
request joined the queue to the end of the step that produced its first token, in simulated time. The
verdict is a table per workload, FCFS against the student's policy (mean, p99 and max TTFT, mean time per
output token, output tokens per second), with each check and why it failed, in the chosen language
(``i18n``; the ``PASS``/``FAIL scheduling_policy:`` prefix stays in English).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from statistics import mean

from nanovllm_teach.exercises.base import GradeResult, not_implemented
from nanovllm_teach.exercises.engine_grading import EngineExercise, run_failure
from nanovllm_teach.runs import TimedWorkload
from nanovllm_teach.exercises.remote import ChildEnd, Outcome
from nanovllm_teach.exercises.verdict import failure_sentence, in_context, load_run, where_it_stopped
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.workload.metrics import percentile
from nanovllm_teach.trace.console import text_width
from nanovllm_teach.trace.reader import Trace

MEAN_TTFT_RATIO = 0.8  # the policy's mean TTFT may be at most this share of FCFS's
MAX_TTFT_RATIO = 1.5  # no request's TTFT may exceed this multiple of FCFS's slowest request

# What the grader says, in both languages (the PASS/FAIL prefix stays in English: graders parse it).
UNFINISHED = Text(en="only {finished} of {total} requests finished", zh="{total} 个请求中只有 {finished} 个完成了")
NOT_FASTER = Text(en="mean TTFT {mean:.1f} ms is {change}; it must be at least {lower:.0%} lower",
                  zh="首 token 延迟的均值为 {mean:.1f} ms，{change}；它必须比 FCFS 的至少低 {lower:.0%}")
BELOW = Text(en="{share:.0%} below FCFS's {fcfs:.1f} ms", zh="比 FCFS 的 {fcfs:.1f} ms 低 {share:.0%}")
ABOVE = Text(en="{share:.0%} above FCFS's {fcfs:.1f} ms", zh="比 FCFS 的 {fcfs:.1f} ms 高 {share:.0%}")
SAME = Text(en="the same as FCFS's {fcfs:.1f} ms", zh="与 FCFS 的 {fcfs:.1f} ms 相同")
STARVED = Text(en="seq {seq} (a {prompt_len}-token prompt) waited {wait:.1f} ms for its first token, {ratio:.2f}x "
                  "FCFS's slowest request ({fcfs_max:.1f} ms); more than {limit:g}x is starvation: it was passed over "
                  "while others went ahead",
               zh="序列 {seq}（prompt 长 {prompt_len} 个 token）等了 {wait:.1f} ms 才得到第一个 token，是 FCFS 中最慢"
                  "请求（{fcfs_max:.1f} ms）的 {ratio:.2f} 倍；超过 {limit:g} 倍就是饥饿：别的请求一个个先走，它一直被跳过")
WORKLOADS_FAIL = Text(en="your policy does not pass {failing} of {total} workloads",
                      zh="你的策略在 {total} 个工作负载中有 {failing} 个没有通过")
ALL_PASS = Text(en="against FCFS your policy cut the mean TTFT by {cuts} and kept every request within {limit:g}x "
                   "FCFS's slowest, on all {total} workloads",
                zh="与 FCFS 相比，你的策略在全部 {total} 个工作负载上把首 token 延迟的均值分别降低了 {cuts}，"
                   "并让每个请求都不超过 FCFS 最慢请求的 {limit:g} 倍")
CUT_SEPARATOR = Text(en=", ", zh="、")
# measure's refusal: a trace it cannot take the latency of.
NO_FIRST_TOKEN = Text(en="trace {path} has no request that got a first token",
                      zh="trace {path} 中没有任何请求得到过第一个 token")
NO_FIRST_TOKEN_IN_MEMORY = Text(en="trace (in memory) has no request that got a first token",
                                zh="这份（内存中的）trace 中没有任何请求得到过第一个 token")

# The leaderboard: each column's heading (two lines: the second is the unit, or the rest of the heading).
COLUMNS: tuple[Text, ...] = (
    Text(en="workload", zh="工作负载"), Text(en="policy", zh="策略"),
    Text(en="mean TTFT\n(ms)", zh="首 token 延迟\n均值（ms）"), Text(en="p99 TTFT\n(ms)", zh="首 token 延迟\np99（ms）"),
    Text(en="max TTFT\n(ms)", zh="首 token 延迟\n最大值（ms）"),
    Text(en="mean TPOT\n(ms)", zh="每个输出 token 的时间\n均值（ms）"), Text(en="tokens/s", zh="每秒\ntoken 数"),
    Text(en="mean <= {mean:g}x FCFS", zh="均值不超过\nFCFS 的 {mean:g} 倍"),
    Text(en="max <= {max:g}x FCFS max", zh="最大值不超过\nFCFS 最大值的 {max:g} 倍"))
YOURS_ROW = Text(en="yours", zh="你的")  # the policy's row (FCFS's is "FCFS" in both languages)
PASSED_CHECK = Text(en="yes ({ratio:.2f}x)", zh="是（{ratio:.2f} 倍）")
FAILED_CHECK = Text(en="NO ({ratio:.2f}x)", zh="否（{ratio:.2f} 倍）")


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
    """The metrics of one run, from its trace alone (requests that never got a token count as unfinished).
    TTFT here is the scheduler's part, from each request's enqueue (``enqueue_ttft_ms``): a policy decides
    who runs once requests are queued, and the limits (``MEAN_TTFT_RATIO``, ``MAX_TTFT_RATIO``) were set on it."""
    served = [r for r in trace.requests if r.enqueue_ttft_ms is not None]
    if not served:
        raise ValueError(say(NO_FIRST_TOKEN, path=trace.path) if trace.path else say(NO_FIRST_TOKEN_IN_MEMORY))
    slowest = max(served, key=lambda r: r.enqueue_ttft_ms)
    ttft = [r.enqueue_ttft_ms for r in served]
    tpot = [r.tpot_ms for r in served if r.tpot_ms is not None]
    rows = trace.steps
    wall_s = (rows[-1].t_end_ns - rows[0].t_start_ns) / 1e9
    tokens = sum(r.num_completion_tokens for r in trace.requests)
    return PolicyMetrics(
        num_requests=len(trace.requests), num_finished=sum(r.finish_reason is not None for r in trace.requests),
        mean_ttft_ms=mean(ttft), p99_ttft_ms=percentile(ttft, 0.99), max_ttft_ms=slowest.enqueue_ttft_ms,
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
        """Why the workload fails, one sentence per check that does (empty when it passes), in the chosen
        language."""
        out: list[str] = []
        y, f = self.yours, self.fcfs
        if not self.finished:
            out.append(say(UNFINISHED, finished=y.num_finished, total=f.num_requests))
        if not self.faster:
            out.append(say(NOT_FASTER, mean=y.mean_ttft_ms, change=_change(self.mean_ratio, f.mean_ttft_ms),
                           lower=1 - MEAN_TTFT_RATIO))
        if not self.fair:
            out.append(say(STARVED, seq=y.slowest_seq, prompt_len=y.slowest_prompt_len, wait=y.max_ttft_ms,
                           ratio=self.max_ratio, fcfs_max=f.max_ttft_ms, limit=MAX_TTFT_RATIO))
        return out


def _change(ratio: float, fcfs_ms: float) -> str:
    if ratio < 1:
        return say(BELOW, share=1 - ratio, fcfs=fcfs_ms)
    return say(ABOVE, share=ratio - 1, fcfs=fcfs_ms) if ratio > 1 else say(SAME, fcfs=fcfs_ms)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _check(passed: bool, ratio: float) -> str:
    return say(PASSED_CHECK if passed else FAILED_CHECK, ratio=ratio)


def leaderboard(scores: list[WorkloadScore]) -> str:
    """Per workload, FCFS and the policy side by side, with both checks, as a fixed-width table in the
    chosen language."""
    heads = [say(text, mean=MEAN_TTFT_RATIO, max=MAX_TTFT_RATIO).split("\n") for text in COLUMNS]
    table = [[head[line] if line < len(head) else "" for head in heads] for line in range(max(map(len, heads)))]
    for s in scores:
        checks = [_check(s.faster, s.mean_ratio), _check(s.fair, s.max_ratio)]
        for first, label, m, shown in ((s.workload.name, "FCFS", s.fcfs, ["", ""]),
                                       ("", say(YOURS_ROW), s.yours, checks)):
            table.append([first, label, _ms(m.mean_ttft_ms), _ms(m.p99_ttft_ms), _ms(m.max_ttft_ms),
                          _ms(m.mean_tpot_ms), f"{m.tokens_per_s:.0f}", *shown])
    widths = [max(text_width(row[c]) for row in table) for c in range(len(COLUMNS))]

    def padded(cell: str, c: int) -> str:
        gap = " " * (widths[c] - text_width(cell))
        return cell + gap if c < 2 else gap + cell
    return "\n".join("  ".join(padded(cell, c) for c, cell in enumerate(row)).rstrip() for row in table)


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

    def _verdict(self, end: ChildEnd, outcome: Outcome, folder: Path, references: dict) -> GradeResult:
        scores: list[WorkloadScore] = []
        traces: dict[str, tuple[Trace, Trace]] = {}
        for workload in self.workloads:
            failure = run_failure(end, outcome, workload.name)
            run = load_run(folder / f"{workload.name}.jsonl")
            if failure is not None and failure.not_implemented:
                return not_implemented(self, failure.function)
            if failure is not None or run is None:
                return self.fail(in_context(workload, failure_sentence(failure, where_it_stopped(run))),
                                 workload.name)
            fcfs = references[workload.name]
            scores.append(WorkloadScore(workload, measure(fcfs), measure(run)))
            traces[workload.name] = (fcfs, run)
        table = leaderboard(scores)
        failing = [s for s in scores if not s.passed]
        if failing:
            lines = [f"  {s.workload.name}: {problem}" for s in failing for problem in s.problems()]
            message = (f"FAIL {self.name}: " + say(WORKLOADS_FAIL, failing=len(failing), total=len(scores)) + "\n"
                       + "\n".join(lines) + "\n\n" + table)
            return PolicyGradeResult(self.name, False, message, failing[0].workload.name, None, scores, table, traces)
        cuts = say(CUT_SEPARATOR).join(f"{1 - s.mean_ratio:.0%}" for s in scores)
        message = (f"PASS {self.name}: " + say(ALL_PASS, cuts=cuts, limit=MAX_TTFT_RATIO, total=len(scores))
                   + f"\n\n{table}")
        return PolicyGradeResult(self.name, True, message, None, None, scores, table, traces)
