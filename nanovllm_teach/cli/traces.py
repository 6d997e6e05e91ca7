"""Command line: ``replay``, ``compare`` and ``diff``, the commands that read recorded traces (no engine, no torch).

- ``replay TRACE``: a recorded trace without Jupyter: ``--out`` a picture (timelines + request Gantt chart),
  ``--html`` a self-contained replay page (a step slider over the timelines, Gantt chart, KV blocks and
  TEACHING lines; any browser, no Python), ``--report`` a static report, ``--text`` the step and request tables.
- ``compare A B``: two traces of one workload side by side (``--out`` a picture) and their summary table,
  with a one-line warning when the two ran different requests (their numbers would not compare one workload).
- ``diff A B``: the first event where two traces of one workload disagree, in plain words (exit 1 if any).

A trace that cannot be read, or that no engine could have written, is a usage mistake (``--lenient`` shows
the valid part of a damaged file, and an impossible one with a warning).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from nanovllm_teach.cli.arguments import UsageError, save_picture, writable_file
from nanovllm_teach.i18n import Text, say

TRACE_IS_A_FOLDER = Text(en="{path} is a folder, not a trace file (a .jsonl file written by a run)",
                         zh="{path} 是文件夹，不是 trace 文件（一次运行写下的 .jsonl 文件）")
NO_TRACE_FILE = Text(en="no such trace file: {path}", zh="没有这个 trace 文件：{path}")
CANNOT_READ_TRACE = Text(en="cannot read trace {path}: {why}", zh="无法读取 trace {path}：{why}")
CANNOT_REPLAY = Text(en="cannot replay {error}{hint}", zh="无法回放：{error}{hint}")
LENIENT_HINT = Text(en=" (--lenient keeps the events before a damaged line)",
                    zh="（加 --lenient 可保留损坏行之前的事件）")
INCONSISTENT = Text(en="{path} is not a trace an engine could have written ({n} problems; the first: {first}); "
                       "--lenient shows it anyway",
                    zh="{path} 不可能是引擎写出的 trace（共 {n} 处问题，第一处：{first}）；加 --lenient 仍可查看")
INCONSISTENT_WARNING = Text(en="warning: {path} is not a trace an engine could have written ({n} problems; the first: "
                               "{first}); what follows shows it as it is",
                            zh="警告：{path} 不可能是引擎写出的 trace（共 {n} 处问题，第一处：{first}）；以下按原样显示")
CANNOT_BE_REPLAYED = Text(en="its events cannot be replayed ({why})", zh="它的事件无法重放（{why}）")
NO_STEP_TO = {"replay": Text(en="{path}: no completed engine step to replay", zh="{path}：没有可回放的已完成引擎步"),
              "compare": Text(en="{path}: no completed engine step to compare", zh="{path}：没有可比较的已完成引擎步")}
# replay's text: a summary and the first rows by default, every row with --all.
SUMMARY_ROWS = 20
REPLAY_SUMMARY = Text(
    en="{steps} steps ({prefill} prefill, {decode} decode) over {seconds:.3g} s; {requests} requests ({finished} "
       "finished), {preemptions} preemptions; TTFT (from arrival) p50 {ttft50} ms, p99 {ttft99} ms; TPOT p50 {tpot50} ms",
    zh="{steps} 个引擎步（预填充 {prefill}，解码 {decode}），历时 {seconds:.3g} 秒；{requests} 个请求（完成 "
       "{finished}），抢占 {preemptions} 次；首 token 延迟（TTFT，从请求到达算起）p50 {ttft50} ms，p99 {ttft99} ms；"
       "每个输出 token 的时间（TPOT）p50 {tpot50} ms")
REPLAY_FIRST_ROWS = Text(en="(the first {n} rows of each table; --all prints every one, --html the replay page)",
                         zh="（每张表只列出前 {n} 行；--all 列出全部，--html 生成回放页）")
WROTE = {"picture": Text(en="picture: {path}", zh="图片：{path}"), "page": Text(en="page:    {path}", zh="回放页：{path}"),
         "report": Text(en="report:  {path}", zh="报告：{path}")}
IDENTICAL = Text(en="identical: {n} events agree (timing and machine fields aside)",
                 zh="完全一致：{n} 个事件都相同（计时和机器相关的字段除外）")
DIFF_EVENT = Text(en="  {label} event #{i}: {line}", zh="  {label} 的第 #{i} 个事件：{line}")
FIRST_DECISION = Text(en="and the first decision where the runs part ways: {message}",
                      zh="两次运行第一个不同的决策：{message}")
DIFFERENT_WORKLOADS = Text(en="warning: {a} and {b} ran different workloads ({why}); compare is meant for two runs "
                                "of the same requests",
                             zh="警告：{a} 和 {b} 运行的是不同的工作负载（{why}）；compare 用来比较同一批请求的两次运行")
REQUEST_COUNTS = Text(en="{a} requests against {b}", zh="{a} 个请求对 {b} 个请求")
REQUEST_DIFFERS = Text(en="seq {seq_id}: {a} against {b}", zh="序列 {seq_id}：一边是{a}，另一边是{b}")
REQUEST_ASKED = Text(en="{prompt_len} prompt tokens, max_tokens {max_tokens}, temperature {temperature:g}",
                     zh="prompt 有 {prompt_len} 个 token，max_tokens {max_tokens}，temperature {temperature:g}")
SAME_DECISIONS = Text(en="yet the runs made the same {n} decisions (who ran each step, which blocks, preemptions)",
                      zh="但两次运行做出的 {n} 个决策完全相同（每步谁运行、用哪些块、抢占）")


def add_replay_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``replay`` subcommand on ``subparsers`` (what ``add_subparsers`` returned)."""
    rep = subparsers.add_parser("replay", help=say(Text(
        en="a recorded trace as a picture, an HTML report or text tables",
        zh="把录好的 trace 呈现为图片、HTML 报告或文本表格")))
    rep.add_argument("trace", help=say(Text(en="a trace file (JSONL)", zh="trace 文件（JSONL）")))
    rep.add_argument("--out", default=None, help=say(Text(
        en="write the timelines and the request Gantt chart (.png, .svg, .pdf)",
        zh="写出时间线和请求甘特图（.png、.svg、.pdf）")))
    rep.add_argument("--html", default=None, help=say(Text(
        en="write a self-contained replay page (step slider, back / play / forward, timelines, Gantt chart, KV blocks, "
           "TEACHING lines) that opens in any browser, no Python needed",
        zh="写出一个自包含的回放页面（步滑块、后退/播放/前进、时间线、甘特图、KV 块、TEACHING 行），任何浏览器都能打开，"
           "无需 Python")))
    rep.add_argument("--report", default=None, help=say(Text(en="write a static HTML report (pictures and tables)",
                                                             zh="写出静态 HTML 报告（图片和表格）")))
    rep.add_argument("--text", action="store_true", help=say(Text(
        en="print a summary and the first rows of the step and request tables (the default)",
        zh="打印摘要以及步表和请求表的前几行（默认）")))
    rep.add_argument("--all", action="store_true", help=say(Text(en="print every row of the step and request tables",
                                                                 zh="打印步表和请求表的每一行")))
    rep.add_argument("--lenient", action="store_true", help=say(Text(en="replay the valid part of a damaged trace",
                                                                     zh="回放损坏 trace 中有效的部分")))
    rep.set_defaults(func=_replay)
    return rep


def add_compare_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``compare`` subcommand on ``subparsers`` (what ``add_subparsers`` returned)."""
    cmp = subparsers.add_parser("compare", help=say(Text(
        en="two traces of one workload side by side, with their summaries",
        zh="把同一工作负载的两个 trace 并排对比，附上各自的摘要")))
    cmp.add_argument("a", help=say(Text(en="the first trace (left)", zh="第一个 trace（左）")))
    cmp.add_argument("b", help=say(Text(en="the second trace (right)", zh="第二个 trace（右）")))
    cmp.add_argument("--out", default=None, help=say(Text(en="write the side-by-side picture (.png, .svg, .pdf)",
                                                          zh="写出并排对比图（.png、.svg、.pdf）")))
    cmp.add_argument("--lenient", action="store_true", help=say(Text(en="compare the valid parts of damaged traces",
                                                                     zh="比较损坏 trace 中有效的部分")))
    cmp.set_defaults(func=_compare)
    return cmp


def add_diff_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``diff`` subcommand on ``subparsers`` (what ``add_subparsers`` returned)."""
    dif = subparsers.add_parser("diff", help=say(Text(
        en="the first event where two traces of one workload disagree (exit 1 if any)",
        zh="同一工作负载的两个 trace 第一次出现分歧的事件（有分歧则退出码为 1）")))
    dif.add_argument("a", help=say(Text(en="the first trace", zh="第一个 trace")))
    dif.add_argument("b", help=say(Text(en="the second trace", zh="第二个 trace")))
    dif.add_argument("--lenient", action="store_true", help=say(Text(en="diff the valid parts of damaged traces",
                                                                     zh="对比损坏 trace 中有效的部分")))
    dif.set_defaults(func=_diff)
    return dif


def _load(path: str, lenient: bool):
    """The trace at ``path``, or a ``UsageError`` saying why it cannot be read or is impossible (with
    ``lenient``: the valid part of a damaged file, and a warning for an impossible one)."""
    from nanovllm_teach.trace import load_trace

    if Path(path).is_dir():
        raise UsageError(say(TRACE_IS_A_FOLDER, path=path))
    try:
        trace = load_trace(path, strict=not lenient)
    except FileNotFoundError:
        raise UsageError(say(NO_TRACE_FILE, path=path)) from None
    except OSError as error:
        raise UsageError(say(CANNOT_READ_TRACE, path=path, why=error.strerror or error)) from None
    except ValueError as error:  # the loader's TraceFormatError and its kin: a damaged or foreign file
        raise UsageError(say(CANNOT_REPLAY, error=error, hint="" if lenient else say(LENIENT_HINT))) from None
    problems = _inconsistencies(trace)
    if problems:
        said = dict(path=path, n=len(problems), first=problems[0])
        if not lenient:
            raise UsageError(say(INCONSISTENT, **said))
        print(say(INCONSISTENT_WARNING, **said), file=sys.stderr)
    return trace


def _inconsistencies(trace: Any) -> list[str]:
    """What ``check_consistency`` finds in a trace that loaded: events no engine could have written in that
    order or with those counts (a replay of it would draw a story that never happened)."""
    from nanovllm_teach.trace import check_consistency

    try:
        return check_consistency(trace)
    except (KeyError, IndexError, ValueError) as error:  # a state the interpreter cannot even reach
        return [say(CANNOT_BE_REPLAYED, why=f"{type(error).__name__}: {error}")]


def _replay(args: argparse.Namespace) -> int:
    picture = writable_file(args.out, "--out", picture=True) if args.out else None
    page = writable_file(args.html, "--html") if args.html else None
    report = writable_file(args.report, "--report") if args.report else None
    trace = _load(args.trace, args.lenient)
    if not trace.steps:
        raise UsageError(say(NO_STEP_TO["replay"], path=args.trace))

    from nanovllm_teach.trace import format_request_table, format_step_table
    from nanovllm_teach.viz.page import write_replay_page
    from nanovllm_teach.viz.report import REQUEST_COLUMNS, STEP_COLUMNS, plot_overview, write_html_report

    if args.text or args.all or not (picture or page or report):
        # The tables' columns are the trace's field names; a line under each says them in words.
        limit = None if args.all else SUMMARY_ROWS
        if not args.all:
            print(_replay_summary(trace))
        print(format_step_table(trace.steps, limit=limit))
        print(say(STEP_COLUMNS))
        print()
        print(format_request_table(trace.requests, limit=limit))
        print(say(REQUEST_COLUMNS))
        if not args.all and max(len(trace.steps), len(trace.requests)) > SUMMARY_ROWS:
            print(say(REPLAY_FIRST_ROWS, n=SUMMARY_ROWS))
    if picture:
        print(say(WROTE["picture"], path=save_picture(plot_overview(trace), picture, dpi=100)))
    if page:
        # A big trace takes seconds to encode: tqdm bars on stderr say how far it is.
        print(say(WROTE["page"], path=write_replay_page(trace, page, lang=args.lang, progress=True)))
    if report:
        print(say(WROTE["report"], path=write_html_report(trace, report, lang=args.lang)))
    return 0


def _replay_summary(trace: Any) -> str:
    from nanovllm_teach.workload.metrics import percentile

    steps, requests = trace.steps, trace.requests
    ttft = [r.ttft_ms for r in requests if r.ttft_ms is not None]
    tpot = [r.tpot_ms for r in requests if r.tpot_ms is not None]
    prefill = sum(row.phase == "prefill" for row in steps)

    def ms(values: list[float], q: float) -> str:
        return f"{percentile(values, q):.1f}" if values else "-"

    return say(REPLAY_SUMMARY, steps=len(steps), prefill=prefill, decode=len(steps) - prefill,
               seconds=(steps[-1].t_end_ns - steps[0].t_start_ns) / 1e9, requests=len(requests),
               finished=sum(r.finish_reason is not None for r in requests),
               preemptions=sum(r.num_preemptions for r in requests), ttft50=ms(ttft, 0.5), ttft99=ms(ttft, 0.99),
               tpot50=ms(tpot, 0.5))


def _compare(args: argparse.Namespace) -> int:
    picture = writable_file(args.out, "--out", picture=True) if args.out else None
    traces = [_load(path, args.lenient) for path in (args.a, args.b)]
    for path, trace in zip((args.a, args.b), traces):
        if not trace.steps:
            raise UsageError(say(NO_STEP_TO["compare"], path=path))

    from nanovllm_teach.viz.compare import compare

    difference = _workload_difference(*traces)
    if difference:
        print(say(DIFFERENT_WORKLOADS, a=args.a, b=args.b, why=difference), file=sys.stderr)
    comparison = compare(traces[0], traces[1])
    print(comparison.table())
    if picture:
        print(say(WROTE["picture"], path=save_picture(comparison.figure, picture, dpi=90)))
    return 0


def _workload_difference(a: Any, b: Any) -> str | None:
    """How the requests of two traces differ (their number, or the first one asked otherwise), or None.

    The requests, not the header's workload name: the same arrivals under static and continuous batching are
    recorded under two names, and that is what ``compare`` is for."""
    if len(a.requests) != len(b.requests):
        return say(REQUEST_COUNTS, a=len(a.requests), b=len(b.requests))
    for x, y in zip(sorted(a.requests, key=lambda r: r.seq_id), sorted(b.requests, key=lambda r: r.seq_id)):
        asked = [dict(prompt_len=r.prompt_len, max_tokens=r.max_tokens, temperature=r.temperature) for r in (x, y)]
        if x.seq_id != y.seq_id or asked[0] != asked[1]:
            return say(REQUEST_DIFFERS, seq_id=x.seq_id, a=say(REQUEST_ASKED, **asked[0]), b=say(REQUEST_ASKED, **asked[1]))
    return None


def _diff(args: argparse.Namespace) -> int:
    from nanovllm_teach.trace.console import format_event
    from nanovllm_teach.trace.diff import BATCH_DECISIONS, DECISION_EVENTS, Voice, diff_decisions, diff_traces

    traces = [_load(path, args.lenient) for path in (args.a, args.b)]
    # Two ordinary runs, neither of them "the reference": the sentences name them by file.
    names = (Path(args.a).name, Path(args.b).name)
    if names[0] == names[1]:
        names = (args.a, args.b)
    voice = Voice.named(*names)
    divergence = diff_traces(traces[0], traces[1], voice=voice)
    if divergence is None:
        print(say(IDENTICAL, n=len(traces[0].events)))
        return 0
    print(divergence.message)
    if divergence.index is None:
        # Runs with other settings (static against continuous batching, another cache size) differ in their
        # headers by design: what a reader wants is where their decisions part ways.
        decisions = (diff_decisions(traces[0], traces[1], BATCH_DECISIONS, voice=voice)
                     or diff_decisions(traces[0], traces[1], voice=voice))
        if decisions is None:
            print(say(SAME_DECISIONS, n=sum(e.event in DECISION_EVENTS for e in traces[0].events)))
            return 1
        print(say(FIRST_DECISION, message=decisions.message))
        divergence = decisions
    for label, event in zip(names, (divergence.yours, divergence.reference)):
        if event is not None:
            print(say(DIFF_EVENT, label=label, i=event.i, line=format_event(event)))
    return 1
