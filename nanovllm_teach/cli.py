"""The ``nanovllm-teach`` command.

- ``demo``: the shipped model answers seed 000's two prompts on this machine, printing the TEACHING log,
  writing the trace (JSONL) and a timeline picture.
- ``record SCENARIO``: regenerate one of the shipped traces in ``traces/`` (``--all`` for every one).
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
    console = ConsoleRenderer(lang=args.lang, verbosity=args.verbosity, stream=sys.stdout)
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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "record" and not args.all and args.scenario is None:
        build_parser().error("record needs a SCENARIO or --all")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
