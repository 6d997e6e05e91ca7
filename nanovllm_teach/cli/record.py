"""Command line: ``demo`` and ``record``, the commands that run the real engine and record its trace.

- ``demo``: the shipped model answers the walkthrough's two prompts on this machine: the two answers, then
  a short account of what the engine did (``--log`` streams the full TEACHING log instead, as it happens),
  and where the trace (JSONL) and the timeline picture were written.
- ``record SCENARIO``: record one of the shipped traces' scenarios (``--all`` for every one) into ``out/``;
  ``--out-dir traces`` regenerates the shipped traces themselves (only when asked: they are the course's).

Nothing here imports torch until the engine is built: a mistake in the arguments is reported first.
"""

from __future__ import annotations

import argparse
from typing import Any

from nanovllm_teach.cli.arguments import (MODEL_FOLDER_HELP, UsageError, model_folder, number_at_least_zero,
                                          positive_int, save_picture, writable_file, writable_folder)
from nanovllm_teach.i18n import Text, say

DEMO_ANSWER = Text(en="Prompt: {prompt!r}  (seq_id={seq_id})\n"
                      "Completion: {text!r}  ({tokens} tokens generated, finished on {reason})\n",
                   zh="Prompt：{prompt!r}  （seq_id={seq_id}）\n"
                      "回答：{text!r}  （生成了 {tokens} 个 token，结束原因：{reason}）\n")
DEMO_FILES = Text(en="\ntrace:    {trace}  (nanovllm-teach replay {trace} --all: every step)\ntimeline: {picture}",
                  zh="\ntrace：    {trace}  （nanovllm-teach replay {trace} --all：逐步列出）\n时间线图：{picture}")
DEMO_FULL_LOG = Text(en="the full TEACHING log of every decision: nanovllm-teach demo --log normal (or detail, all)",
                     zh="每个决策的完整 TEACHING 日志：nanovllm-teach demo --log normal（或 detail、all）")
RECORD_NEEDS = Text(en="record needs a SCENARIO or --all (not both)", zh="record 需要 SCENARIO 或 --all（二者选一）")
RECORDED = Text(en="{name}: {n} requests -> {path} ({mb:.2f} MB)", zh="{name}：{n} 个请求 -> {path}（{mb:.2f} MB）")


def add_demo_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``demo`` subcommand on ``subparsers`` (what ``add_subparsers`` returned)."""
    demo = subparsers.add_parser("demo", help=say(Text(
        en="run the shipped model on the walkthrough's two prompts and say what the engine did",
        zh="用自带的模型回答导览中的两个 prompt，并说明引擎做了什么")))
    demo.add_argument("--model", default=None, help=say(MODEL_FOLDER_HELP))
    demo.add_argument("--out", default="out", help=say(Text(en="folder for the trace and the picture (default: out)",
                                                            zh="存放 trace 和图片的文件夹（默认：out）")))
    demo.add_argument("--log", choices=["quiet", "normal", "detail", "all"], default=None, help=say(Text(
        en="stream the TEACHING log while it runs, at this level (default: none, only the account at the end)",
        zh="运行时按这个级别实时输出 TEACHING 日志（默认：不输出，只在结束时总结）")))
    demo.add_argument("--temperature", type=number_at_least_zero, default=0.6, help=say(Text(
        en="0 is greedy (default: 0.6)", zh="0 即贪心解码（默认：0.6）")))
    demo.add_argument("--max-tokens", type=positive_int, default=64, help=say(Text(
        en="per request (default: 64: one answer ends on EOS, the other is cut)",
        zh="每个请求的上限（默认：64：一个回答以 EOS 结束，另一个被截断）")))
    demo.add_argument("--seed", type=int, default=0, help=say(Text(en="per-request sampling seeds start here",
                                                                   zh="各请求的采样 seed 从这里开始编号")))
    demo.set_defaults(func=_demo)
    return demo


def add_record_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``record`` subcommand on ``subparsers`` (what ``add_subparsers`` returned)."""
    from nanovllm_teach.scenarios import SCENARIOS  # plain data: no torch

    rec = subparsers.add_parser("record", help=say(Text(
        en="record a scenario's trace (--out-dir traces: regenerate the shipped ones)",
        zh="录制一个场景的 trace（--out-dir traces：重新生成自带的 trace）")))
    rec.add_argument("scenario", nargs="?", default=None, help=say(Text(en="one of: {names}", zh="可选：{names}"),
                                                                   names=", ".join(map(repr, SCENARIOS))))
    rec.add_argument("--all", action="store_true", help=say(Text(en="record every scenario", zh="录制所有场景")))
    rec.add_argument("--out-dir", default="out", help=say(Text(
        en="folder for the SCENARIO.jsonl files (default: out; traces overwrites the shipped traces)",
        zh="存放 SCENARIO.jsonl 文件的文件夹（默认：out；traces 会覆盖自带的 trace）")))
    rec.add_argument("--model", default=None, help=say(MODEL_FOLDER_HELP))
    rec.set_defaults(func=_record)
    return rec


def _demo(args: argparse.Namespace) -> int:
    from nanovllm_teach.scenarios import WALKTHROUGH_PROMPTS, walkthrough_params

    params = walkthrough_params(args.temperature, args.max_tokens, args.seed)  # a bad value stops us here
    model = model_folder(args.model)
    out = writable_folder(args.out, "--out")
    trace_path = writable_file(str(out / "demo_trace.jsonl"), "--out")
    picture_path = writable_file(str(out / "demo_timeline.png"), "--out", picture=True)

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
    picture = save_picture(plot_timelines(trace), picture_path, dpi=110)
    print("\n".join(format_run_account(trace)))
    print(say(DEMO_FILES, trace=trace_path, picture=picture))
    if not args.log:
        print(say(DEMO_FULL_LOG))
    return 0


def _record(args: argparse.Namespace) -> int:
    from nanovllm_teach.scenarios import SCENARIOS, UNKNOWN_SCENARIO, record

    if args.all == (args.scenario is not None):
        raise UsageError(say(RECORD_NEEDS))
    if not args.all and args.scenario not in SCENARIOS:
        raise UsageError(say(UNKNOWN_SCENARIO, name=args.scenario, names=", ".join(SCENARIOS)))
    names = list(SCENARIOS) if args.all else [args.scenario]
    model = model_folder(args.model)
    folder = writable_folder(args.out_dir, "--out-dir")
    for name in names:
        path = writable_file(str(folder / f"{name}.jsonl"), "--out-dir")
        outputs = record(name, path, model=model)
        print(say(RECORDED, name=name, n=len(outputs), path=path, mb=path.stat().st_size / 1e6))
    return 0
