"""The ``nanovllm-teach`` command.

- ``demo``: the shipped model answers seed 000's two prompts on this machine, printing the TEACHING log,
  writing the trace (JSONL) and a timeline picture.
- ``record SCENARIO``: regenerate one of the shipped traces in ``traces/`` (``--all`` for every one).
- ``replay TRACE``: a recorded trace without Jupyter: ``--out`` a PNG (timelines + request Gantt chart),
  ``--html`` a self-contained report page, ``--text`` the step and request tables in the terminal.
- ``compare A B``: two traces of one workload side by side (``--out`` a PNG) and their summary table.
- ``diff A B``: the first event where two traces of one workload disagree, in plain words (exit 1 if any).
- ``exercises``: the classroom exercises and their templates; ``grade EXERCISE SOLUTION.py`` grades one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _demo(args: argparse.Namespace) -> int:
    from nanovllm_teach.llm import LLM
    from nanovllm_teach.sampling_params import SamplingParams
    from nanovllm_teach.scenarios import SEED_PROMPTS
    from nanovllm_teach.trace import TraceRecorder, load_trace
    from nanovllm_teach.trace.console import ConsoleRenderer
    from nanovllm_teach.viz.timeline import save_timelines

    out = Path(args.out)
    trace_path = out / "demo_trace.jsonl"
    console = ConsoleRenderer(lang=args.lang, verbosity=args.verbosity)
    llm = LLM(args.model, trace=TraceRecorder(trace_path, sinks=[console]))
    prompts = [llm.tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False,
                                                 add_generation_prompt=True) for p in SEED_PROMPTS]
    params = [SamplingParams(temperature=args.temperature, max_tokens=args.max_tokens, seed=args.seed + i)
              for i in range(len(prompts))]
    outputs = llm.generate(prompts, params, use_tqdm=False)
    llm.close()
    print()
    for prompt, output in zip(SEED_PROMPTS, outputs):
        print(f"Prompt: {prompt!r}  (seq_id={output['seq_id']}, {len(output['token_ids'])} tokens, "
              f"finished on {output['finish_reason']})")
        print(f"Completion: {output['text']!r}\n")
    picture = save_timelines(load_trace(trace_path), out / "demo_timeline.png")
    print(f"trace:    {trace_path}\ntimeline: {picture}")
    return 0


def _record(args: argparse.Namespace) -> int:
    from nanovllm_teach.scenarios import SCENARIOS, record

    names = list(SCENARIOS) if args.all else [args.scenario]
    if not args.all and args.scenario not in SCENARIOS:
        print(f"unknown scenario {args.scenario!r}; choose from: {', '.join(SCENARIOS)}", file=sys.stderr)
        return 2
    for name in names:
        path = Path(args.out_dir) / f"{name}.jsonl"
        outputs = record(name, path, model=args.model)
        print(f"{name}: {len(outputs)} requests -> {path} ({path.stat().st_size / 1e6:.2f} MB)")
    return 0


def _load(path: str, lenient: bool):
    """A trace, or None after printing why it cannot be read."""
    from nanovllm_teach.trace import TraceFormatError, load_trace

    try:
        return load_trace(path, strict=not lenient)
    except FileNotFoundError:
        print(f"no such trace file: {path}", file=sys.stderr)
    except TraceFormatError as error:
        print(f"cannot replay {error}" + ("" if lenient else " (--lenient keeps the events before a damaged line)"),
              file=sys.stderr)
    return None


def _replay(args: argparse.Namespace) -> int:
    from nanovllm_teach.trace import format_request_table, format_step_table
    from nanovllm_teach.viz.report import save_overview, write_html_report

    trace = _load(args.trace, args.lenient)
    if trace is None:
        return 2
    if not trace.steps:
        print(f"{args.trace}: no completed engine step to replay", file=sys.stderr)
        return 2
    if args.text or not (args.out or args.html):
        print(format_step_table(trace.steps))
        print()
        print(format_request_table(trace.requests))
    if args.out:
        print(f"picture: {save_overview(trace, args.out)}")
    if args.html:
        print(f"report:  {write_html_report(trace, args.html)}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    from nanovllm_teach.viz.compare import compare
    from nanovllm_teach.viz.render import figure_png

    traces = [_load(path, args.lenient) for path in (args.a, args.b)]
    if traces[0] is None or traces[1] is None:
        return 2
    for path, trace in zip((args.a, args.b), traces):
        if not trace.steps:
            print(f"{path}: no completed engine step to compare", file=sys.stderr)
            return 2
    comparison = compare(traces[0], traces[1])
    print(comparison.table())
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(figure_png(comparison.figure, dpi=90))
        print(f"picture: {out}")
    return 0


def _diff(args: argparse.Namespace) -> int:
    from nanovllm_teach.trace.console import format_event
    from nanovllm_teach.trace.diff import diff_traces

    traces = [_load(path, args.lenient) for path in (args.a, args.b)]
    if traces[0] is None or traces[1] is None:
        return 2
    divergence = diff_traces(traces[0], traces[1])
    if divergence is None:
        print(f"identical: {len(traces[0].events)} events agree (timing and machine fields aside)")
        return 0
    print(divergence.message)
    for label, event in (("A", divergence.yours), ("B", divergence.reference)):
        if event is not None:
            print(f"  {label} event #{event.i}: {format_event(event)}")
    return 1


def _exercises(args: argparse.Namespace) -> int:
    from nanovllm_teach.exercises import EXERCISES

    for number, ex in enumerate(EXERCISES.values(), 1):
        print(f"{number}. {ex.name:<16} {ex.title}  [{ex.replaces}]\n   template: {ex.template_path}")
    print("\nCopy a template, fill it in, then: nanovllm-teach grade EXERCISE your_file.py")
    return 0


def _grade(args: argparse.Namespace) -> int:
    from nanovllm_teach.exercises import EXERCISES, grade

    if args.exercise not in EXERCISES:
        print(f"unknown exercise {args.exercise!r}; choose from: {', '.join(EXERCISES)}", file=sys.stderr)
        return 2
    if not Path(args.solution).is_file():
        print(f"no such solution file: {args.solution}", file=sys.stderr)
        return 2
    result = grade(args.exercise, args.solution, model=args.model)
    print(result.message)
    return 0 if result.passed else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nanovllm-teach", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="run the shipped model on the seed's two prompts, with its TEACHING log")
    demo.add_argument("--model", default=None, help="checkpoint directory (default: the shipped model)")
    demo.add_argument("--out", default="out", help="folder for the trace and the picture (default: out)")
    demo.add_argument("--lang", choices=["en", "zh"], default="en", help="language of the log's reasons")
    demo.add_argument("--verbosity", choices=["quiet", "normal", "detail"], default="normal")
    demo.add_argument("--temperature", type=float, default=0.6)
    demo.add_argument("--max-tokens", type=int, default=256)
    demo.add_argument("--seed", type=int, default=0, help="per-request sampling seeds start here")
    demo.set_defaults(func=_demo)

    rec = sub.add_parser("record", help="record a scenario's trace (the shipped traces in traces/)")
    rec.add_argument("scenario", nargs="?", default=None)
    rec.add_argument("--all", action="store_true", help="record every scenario")
    rec.add_argument("--out-dir", default="traces")
    rec.add_argument("--model", default=None, help="checkpoint directory (default: the shipped model)")
    rec.set_defaults(func=_record)

    rep = sub.add_parser("replay", help="a recorded trace as a picture, an HTML report or text tables")
    rep.add_argument("trace", help="a trace file (JSONL)")
    rep.add_argument("--out", default=None, help="write the timelines and the request Gantt chart (PNG)")
    rep.add_argument("--html", default=None, help="write a self-contained HTML report")
    rep.add_argument("--text", action="store_true", help="print the step and request tables (the default)")
    rep.add_argument("--lenient", action="store_true", help="replay the valid part of a damaged trace")
    rep.set_defaults(func=_replay)

    cmp = sub.add_parser("compare", help="two traces of one workload side by side, with their summaries")
    cmp.add_argument("a", help="the first trace (left)")
    cmp.add_argument("b", help="the second trace (right)")
    cmp.add_argument("--out", default=None, help="write the side-by-side picture (PNG)")
    cmp.add_argument("--lenient", action="store_true", help="compare the valid parts of damaged traces")
    cmp.set_defaults(func=_compare)

    dif = sub.add_parser("diff", help="the first event where two traces of one workload disagree (exit 1 if any)")
    dif.add_argument("a", help="your trace (\"you\" in the sentence)")
    dif.add_argument("b", help="the reference trace")
    dif.add_argument("--lenient", action="store_true", help="diff the valid parts of damaged traces")
    dif.set_defaults(func=_diff)

    exs = sub.add_parser("exercises", help="list the classroom exercises and their templates")
    exs.set_defaults(func=_exercises)

    grd = sub.add_parser("grade", help="grade a solution file: its engine's trace against the reference's")
    grd.add_argument("exercise", help="the exercise's name (see: nanovllm-teach exercises)")
    grd.add_argument("solution", help="your Python file defining the exercise's function(s)")
    grd.add_argument("--model", default=None, help="checkpoint directory (default: the shipped model)")
    grd.set_defaults(func=_grade)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "record" and not args.all and args.scenario is None:
        build_parser().error("record needs a SCENARIO or --all")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
