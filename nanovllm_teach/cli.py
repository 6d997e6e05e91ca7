"""The nanovllm-teach command.

- ``demo``: the shipped model answers the walkthrough's two prompts on this machine: the two answers, then
  a short account of what the engine did (``--log`` streams the full TEACHING log instead, as it happens),
  and where the trace (JSONL) and the timeline picture were written.
- ``record SCENARIO``: regenerate one of the shipped traces in ``traces/`` (``--all`` for every one).
- ``replay TRACE``: a recorded trace without Jupyter: ``--out`` a picture (timelines + request Gantt chart),
  ``--html`` a self-contained replay page (a step slider over the timelines, Gantt chart, KV blocks and
  TEACHING lines; any browser, no Python), ``--report`` a static report, ``--text`` the step and request tables.
- ``simulate``: the same engine on a simulated GPU (``--model qwen3-8b --hardware h100-sxm --rate 8``), its
  trace written for ``replay``/``compare`` like any other.
- ``compare A B``: two traces of one workload side by side (``--out`` a picture) and their summary table.
- ``diff A B``: the first event where two traces of one workload disagree, in plain words (exit 1 if any).
- ``exercises``: the classroom exercises and their templates; ``grade EXERCISE PATH...`` grades one solution
  or a class, each submission in a sandbox (``exercises/grade_cli.py``).

A mistake in what was asked (a missing or damaged file, a folder where a file belongs, an output that
cannot be written, a bad value) ends with one line, ``nanovllm-teach: error: ...``, and exit status 2.
Outputs are checked before any work starts. A picture's format follows its suffix: .png, .svg or .pdf.

What a command prints for a learner is in the chosen language (``--lang``, else ``NANOVLLM_TEACH_LANG``,
else the locale): the texts below, as ``Text`` constants. The ``--help`` texts and argparse's own messages
about the command line stay English.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nanovllm_teach.i18n import ENV_VAR, LANGS, Text, say, speaking
from nanovllm_teach.exercises.grade_cli import add_grade_parser
from nanovllm_teach.serve.cli import add_serve_parser
from nanovllm_teach.sim.cli import add_simulate_parser
from nanovllm_teach.trace.payload import printable

PROG = "nanovllm-teach"
PICTURE_FORMATS = (".png", ".svg", ".pdf")


class UsageError(Exception):
    """A mistake in the command line or its files: reported as one line, exit status 2."""


# ---- what the commands say ------------------------------------------------------------------------------

IS_A_FOLDER_GIVE_A_FILE = Text(en="{option} {path} is a folder: give a file name",
                               zh="{option} {path} 是一个文件夹：请给出文件名")
PICTURE_SUFFIX = Text(en="{option} {path}: the picture format follows the suffix; use one of {formats}",
                      zh="{option} {path}：图片格式由后缀决定，请用 {formats} 之一")
CANNOT_BE_WRITTEN = Text(en="{option} {path} cannot be written: {why}", zh="{option} {path} 无法写入：{why}")
IS_A_FILE_NOT_A_FOLDER = Text(en="{option} {path} is a file, not a folder", zh="{option} {path} 是文件，不是文件夹")
CANNOT_BE_CREATED = Text(en="{option} {path} cannot be created: {why}", zh="{option} {path} 无法创建：{why}")
NO_MODEL_FOLDER = Text(en="--model {path}: no such folder (give a checkpoint folder with a config.json)",
                       zh="--model {path}：没有这个文件夹（请给出含 config.json 的 checkpoint 文件夹）")
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
RECORD_NEEDS = Text(en="record needs a SCENARIO or --all (not both)", zh="record 需要 SCENARIO 或 --all（二者选一）")
UNKNOWN_SCENARIO = Text(en="unknown scenario {name!r}; choose from: {names}", zh="没有场景 {name!r}；可选：{names}")
UNKNOWN_EXERCISE = Text(en="unknown exercise {name!r}; choose from: {names}", zh="没有练习 {name!r}；可选：{names}")
SEE_HELP = Text(en="(see {prog} --help)", zh="（见 {prog} --help）")

DEMO_ANSWER = Text(en="Prompt: {prompt!r}  (seq_id={seq_id})\n"
                      "Completion: {text!r}  ({tokens} tokens generated, finished on {reason})\n",
                   zh="Prompt：{prompt!r}  （seq_id={seq_id}）\n"
                      "回答：{text!r}  （生成了 {tokens} 个 token，结束原因：{reason}）\n")
DEMO_FILES = Text(en="\ntrace:    {trace}  (nanovllm-teach replay {trace} --all: every step)\ntimeline: {picture}",
                  zh="\ntrace：    {trace}  （nanovllm-teach replay {trace} --all：逐步列出）\n时间线图：{picture}")
# replay's text: a summary and the first rows by default, every row with --all.
SUMMARY_ROWS = 20
REPLAY_SUMMARY = Text(
    en="{steps} steps ({prefill} prefill, {decode} decode) over {seconds:.3g} s; {requests} requests ({finished} "
       "finished), {preemptions} preemptions; TTFT p50 {ttft50} ms, p99 {ttft99} ms; TPOT p50 {tpot50} ms",
    zh="{steps} 个引擎步（预填充 {prefill}，解码 {decode}），历时 {seconds:.3g} 秒；{requests} 个请求（完成 "
       "{finished}），抢占 {preemptions} 次；首 token 延迟（TTFT）p50 {ttft50} ms，p99 {ttft99} ms；"
       "每个输出 token 的时间（TPOT）p50 {tpot50} ms")
REPLAY_FIRST_ROWS = Text(en="(the first {n} rows of each table; --all prints every one, --html the replay page)",
                         zh="（每张表只列出前 {n} 行；--all 列出全部，--html 生成回放页）")
DEMO_FULL_LOG = Text(en="the full TEACHING log of every decision: nanovllm-teach demo --log normal (or detail, all)",
                     zh="每个决策的完整 TEACHING 日志：nanovllm-teach demo --log normal（或 detail、all）")
RECORDED = Text(en="{name}: {n} requests -> {path} ({mb:.2f} MB)", zh="{name}：{n} 个请求 -> {path}（{mb:.2f} MB）")
WROTE = {"picture": Text(en="picture: {path}", zh="图片：{path}"), "page": Text(en="page:    {path}", zh="回放页：{path}"),
         "report": Text(en="report:  {path}", zh="报告：{path}")}
IDENTICAL = Text(en="identical: {n} events agree (timing and machine fields aside)",
                 zh="完全一致：{n} 个事件都相同（计时和机器相关的字段除外）")
DIFF_EVENT = Text(en="  {label} event #{i}: {line}", zh="  {label} 的第 #{i} 个事件：{line}")
FIRST_DECISION = Text(en="and the first decision where the runs part ways: {message}",
                      zh="两次运行第一个不同的决策：{message}")
SAME_DECISIONS = Text(en="yet the runs made the same {n} decisions (who ran each step, which blocks, preemptions)",
                      zh="但两次运行做出的 {n} 个决策完全相同（每步谁运行、用哪些块、抢占）")
EXERCISE_LINE = Text(en="{number}. {name:<16} {title}  [{replaces}]\n   template: {template}",
                     zh="{number}. {name:<16} {title}  [{replaces}]\n   模板：{template}")
EXERCISES_NEXT = Text(en="\nCopy a template, fill it in, then: nanovllm-teach grade EXERCISE your_file.py\n"
                         "Stuck? nanovllm-teach hint EXERCISE 1 (then 2) gives a hint.",
                      zh="\n复制一份模板，填好，然后运行：nanovllm-teach grade EXERCISE your_file.py\n"
                         "卡住了？nanovllm-teach hint EXERCISE 1（再 2）会给出提示。")


# ---- checks made before any work ------------------------------------------------------------------------

def _writable_file(path: str, option: str, picture: bool = False) -> Path:
    """``path`` as a file this command can write (created and removed again to find out)."""
    out = Path(path)
    if out.is_dir():
        raise UsageError(say(IS_A_FOLDER_GIVE_A_FILE, option=option, path=path))
    if picture and out.suffix.lower() not in PICTURE_FORMATS:
        raise UsageError(say(PICTURE_SUFFIX, option=option, path=path, formats=", ".join(PICTURE_FORMATS)))
    existed = out.exists()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("ab"):
            pass
        if not existed:
            out.unlink()
    except OSError as error:
        raise UsageError(say(CANNOT_BE_WRITTEN, option=option, path=path, why=error.strerror or error)) from None
    return out


def _writable_folder(path: str, option: str) -> Path:
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise UsageError(say(IS_A_FILE_NOT_A_FOLDER, option=option, path=path))
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(say(CANNOT_BE_CREATED, option=option, path=path, why=error.strerror or error)) from None
    _writable_file(str(folder / ".nanovllm_teach_write_check"), option)
    return folder


def _model_folder(path: str | None) -> str | None:
    if path is not None and not Path(path).is_dir():
        raise UsageError(say(NO_MODEL_FOLDER, path=path))
    return path


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


def _save_picture(figure: Any, path: Path, dpi: float) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    figure.savefig(path, format=path.suffix.lower().lstrip("."), dpi=dpi)
    return path


# ---- the commands ---------------------------------------------------------------------------------------

def _demo(args: argparse.Namespace) -> int:
    from nanovllm_teach.scenarios import WALKTHROUGH_PROMPTS, walkthrough_params

    params = walkthrough_params(args.temperature, args.max_tokens, args.seed)  # a bad value stops us here
    model = _model_folder(args.model)
    out = _writable_folder(args.out, "--out")
    trace_path = _writable_file(str(out / "demo_trace.jsonl"), "--out")
    picture_path = _writable_file(str(out / "demo_timeline.png"), "--out", picture=True)

    from nanovllm_teach.llm import LLM
    from nanovllm_teach.trace import TraceRecorder, load_trace
    from nanovllm_teach.trace.console import ConsoleRenderer, format_run_account
    from nanovllm_teach.viz.timeline import plot_timelines

    sinks = [ConsoleRenderer(lang=args.lang, verbosity=args.log)] if args.log else []
    llm = LLM(model, trace=TraceRecorder(trace_path, sinks=sinks))
    try:
        prompts = [llm.tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                                     add_generation_prompt=True) for p in WALKTHROUGH_PROMPTS]
        outputs = llm.generate(prompts, params, use_tqdm=False)
    finally:
        llm.close()
    if args.log:
        print()
    for prompt, output in zip(WALKTHROUGH_PROMPTS, outputs):
        print(say(DEMO_ANSWER, prompt=prompt, seq_id=output["seq_id"], tokens=len(output["token_ids"]),
                  reason=output["finish_reason"], text=output["text"]))
    trace = load_trace(trace_path)
    picture = _save_picture(plot_timelines(trace), picture_path, dpi=110)
    print("\n".join(format_run_account(trace)))
    print(say(DEMO_FILES, trace=trace_path, picture=picture))
    if not args.log:
        print(say(DEMO_FULL_LOG))
    return 0


def _record(args: argparse.Namespace) -> int:
    from nanovllm_teach.scenarios import SCENARIOS, record

    if args.all == (args.scenario is not None):
        raise UsageError(say(RECORD_NEEDS))
    if not args.all and args.scenario not in SCENARIOS:
        raise UsageError(say(UNKNOWN_SCENARIO, name=args.scenario, names=", ".join(SCENARIOS)))
    names = list(SCENARIOS) if args.all else [args.scenario]
    model = _model_folder(args.model)
    folder = _writable_folder(args.out_dir, "--out-dir")
    for name in names:
        path = _writable_file(str(folder / f"{name}.jsonl"), "--out-dir")
        outputs = record(name, path, model=model)
        print(say(RECORDED, name=name, n=len(outputs), path=path, mb=path.stat().st_size / 1e6))
    return 0


def _replay(args: argparse.Namespace) -> int:
    picture = _writable_file(args.out, "--out", picture=True) if args.out else None
    page = _writable_file(args.html, "--html") if args.html else None
    report = _writable_file(args.report, "--report") if args.report else None
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
        print(say(WROTE["picture"], path=_save_picture(plot_overview(trace), picture, dpi=100)))
    if page:
        print(say(WROTE["page"], path=write_replay_page(trace, page, lang=args.lang)))
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
    picture = _writable_file(args.out, "--out", picture=True) if args.out else None
    traces = [_load(path, args.lenient) for path in (args.a, args.b)]
    for path, trace in zip((args.a, args.b), traces):
        if not trace.steps:
            raise UsageError(say(NO_STEP_TO["compare"], path=path))

    from nanovllm_teach.viz.compare import compare

    comparison = compare(traces[0], traces[1])
    print(comparison.table())
    if picture:
        print(say(WROTE["picture"], path=_save_picture(comparison.figure, picture, dpi=90)))
    return 0


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


def _exercises(args: argparse.Namespace) -> int:
    from nanovllm_teach.exercises import EXERCISES

    for number, ex in enumerate(EXERCISES.values(), 1):
        print(say(EXERCISE_LINE, number=number, name=ex.name, title=say(ex.title), replaces=ex.replaces,
                  template=ex.template_path))
    print(say(EXERCISES_NEXT))
    return 0


def _hint(args: argparse.Namespace) -> int:
    from nanovllm_teach.exercises import EXERCISES, hint

    if args.exercise not in EXERCISES:
        raise UsageError(say(UNKNOWN_EXERCISE, name=args.exercise, names=", ".join(EXERCISES)))
    print(hint(args.exercise, args.level))
    return 0


# ---- the parser -----------------------------------------------------------------------------------------

class _Parser(argparse.ArgumentParser):
    """Usage mistakes as one line, like every other mistake."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{PROG}: error: {message} {say(SEE_HELP, prog=self.prog)}\n")


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _number_at_least_zero(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
    return value


_positive_int.__name__ = "int >= 1"  # argparse names the type in its message: "invalid int >= 1 value"
_number_at_least_zero.__name__ = "number >= 0"


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Run, record, replay and compare the engine's TEACHING traces, "
                                            "and grade the classroom exercises.")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="run the shipped model on the walkthrough's two prompts and say what "
                                       "the engine did")
    demo.add_argument("--model", default=None, help="checkpoint folder (default: the shipped model)")
    demo.add_argument("--out", default="out", help="folder for the trace and the picture (default: out)")
    demo.add_argument("--log", choices=["quiet", "normal", "detail", "all"], default=None,
                      help="stream the TEACHING log while it runs, at this level (default: none, only the "
                           "account at the end)")
    demo.add_argument("--temperature", type=_number_at_least_zero, default=0.6, help="0 is greedy (default: 0.6)")
    demo.add_argument("--max-tokens", type=_positive_int, default=64,
                      help="per request (default: 64: one answer ends on EOS, the other is cut)")
    demo.add_argument("--seed", type=int, default=0, help="per-request sampling seeds start here")
    demo.set_defaults(func=_demo)

    from nanovllm_teach.scenarios import SCENARIOS  # plain data: no torch

    rec = sub.add_parser("record", help="record a scenario's trace (the shipped traces in traces/)")
    rec.add_argument("scenario", nargs="?", default=None, help=f"one of: {', '.join(SCENARIOS)}")
    rec.add_argument("--all", action="store_true", help="record every scenario")
    rec.add_argument("--out-dir", default="traces", help="folder for the SCENARIO.jsonl files (default: traces)")
    rec.add_argument("--model", default=None, help="checkpoint folder (default: the shipped model)")
    rec.set_defaults(func=_record)

    rep = sub.add_parser("replay", help="a recorded trace as a picture, an HTML report or text tables")
    rep.add_argument("trace", help="a trace file (JSONL)")
    rep.add_argument("--out", default=None, help="write the timelines and the request Gantt chart (.png, .svg, .pdf)")
    rep.add_argument("--html", default=None, help="write a self-contained replay page (step slider, back / play / "
                     "forward, timelines, Gantt chart, KV blocks, TEACHING lines) that opens in any browser, no "
                     "Python needed")
    rep.add_argument("--report", default=None, help="write a static HTML report (pictures and tables)")
    rep.add_argument("--text", action="store_true", help="print a summary and the first rows of the step and request "
                     "tables (the default)")
    rep.add_argument("--all", action="store_true", help="print every row of the step and request tables")
    rep.add_argument("--lenient", action="store_true", help="replay the valid part of a damaged trace")
    rep.set_defaults(func=_replay)

    cmp = sub.add_parser("compare", help="two traces of one workload side by side, with their summaries")
    cmp.add_argument("a", help="the first trace (left)")
    cmp.add_argument("b", help="the second trace (right)")
    cmp.add_argument("--out", default=None, help="write the side-by-side picture (.png, .svg, .pdf)")
    cmp.add_argument("--lenient", action="store_true", help="compare the valid parts of damaged traces")
    cmp.set_defaults(func=_compare)

    dif = sub.add_parser("diff", help="the first event where two traces of one workload disagree (exit 1 if any)")
    dif.add_argument("a", help="the first trace")
    dif.add_argument("b", help="the second trace")
    dif.add_argument("--lenient", action="store_true", help="diff the valid parts of damaged traces")
    dif.set_defaults(func=_diff)

    exs = sub.add_parser("exercises", help="list the classroom exercises and their templates")
    exs.set_defaults(func=_exercises)

    hnt = sub.add_parser("hint", help="a hint for an exercise: level 1 says where to look, 2 how")
    hnt.add_argument("exercise", help="the exercise's name (see: nanovllm-teach exercises)")
    hnt.add_argument("level", nargs="?", type=_positive_int, default=1,
                     help="1 (the default) says where to look; each level says a little more")
    hnt.set_defaults(func=_hint)

    add_grade_parser(sub)
    add_simulate_parser(sub)
    add_serve_parser(sub)
    for command in sub.choices.values():  # every command speaks the learner's language
        command.add_argument("--lang", choices=LANGS, default=None,
                             help=f"language of what it writes (default: ${ENV_VAR}, else the locale, else en)")
    return parser


class _Shown(io.TextIOBase):
    """A text stream that writes control characters as their escapes (``printable``), but for the newlines,
    tabs and carriage returns (progress bars) of the CLI's own output: what a trace or a model wrote is shown,
    never obeyed by the terminal."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(printable(text, keep="\n\t\r"))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def fileno(self) -> int:
        return self._stream.fileno()

    def isatty(self) -> bool:
        return self._stream.isatty()

    @property
    def encoding(self) -> str:
        return getattr(self._stream, "encoding", "utf-8")


@contextmanager
def _shown_streams() -> Iterator[None]:
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Shown(out), _Shown(err)
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with speaking(args.lang), _shown_streams():
            return args.func(args)
    except BrokenPipeError:  # the reader went away (``| head``): nothing more to say, and no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except UsageError as error:
        message = str(error)
    except (ValueError, TypeError) as error:  # a bad value, named by whoever refused it
        message = str(error)
    print(f"{PROG}: error: {printable(' '.join(message.split()))}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
