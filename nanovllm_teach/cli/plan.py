"""Command line: ``plan``, the cheapest deployment that serves a workload at a target rate within a latency SLO.

    nanovllm-teach plan --model llama-3.1-8b --rate 20 --ttft-ms 1000 --tpot-ms 50 \\
        --gpus h100-sxm,a100-80gb --tp 1,2 --max-num-seqs 128,256 --quantization none,fp8 --out plan.json

For every candidate of the space (GPUs x TP x ``max_num_seqs`` x ``max_num_batched_tokens`` x the weights'
``--quantization``: ``none``, 16-bit, or ``fp8``, on the GPUs with FP8 tensor cores) it prints what one
GPU holds (``memory_fit``: weights, KV blocks, the longest request), searches the highest rate one replica
sustains under the SLO (``plan/probes.py``; the probes run on Ray unless ``--serial``: ``plan/search.py``, with a
progress bar and a log to resume from), then prints the cheapest configuration (candidate x replicas) that
reaches the target rate, the runners-up, and the ``simulate`` command that reproduces each. ``--out`` writes
every row as JSON (``.json``) or CSV (``.csv``), ``--picture`` the Pareto picture of cost per hour against
sustained rate (``viz/pareto.py``). Prices come from ``sim/prices.json`` (public on-demand prices, each with
its page and date), replaced by ``--price GPU=USD`` or ``--prices FILE``. ``--workload-trace FILE`` takes the
workload from a trace's finished requests (``plan/recorded.py``) instead of length distributions.

Everything is checked before the first probe; a mistake is one line and exit status 2 (``cli.main``).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from nanovllm_teach.cli.arguments import positive_int, writable_file
from nanovllm_teach.cli.messages import (BAD_QUANTIZATIONS, BAD_TARGET_RATE, GPU_WITHOUT_PRICE, NO_FP8_CANDIDATE,
                                         NOT_DISTINCT_INTS, NOT_INTS, PLAN_OUT_SUFFIX, UNKNOWN_GPU)
from nanovllm_teach.cli.simulate import UNFITTED
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.sim.cost_model import load_shape
from nanovllm_teach.settings import QUANTIZATIONS, SERVING_ENGINES
from nanovllm_teach.sim.hardware import DEVICES
from nanovllm_teach.plan.probes import QUANTILES, Candidate, MemoryFit, Objective, PlanWorkload, memory_fit
from nanovllm_teach.plan.rates import search_steps
from nanovllm_teach.plan.recorded import read_recorded_requests
from nanovllm_teach.plan.results import PlanRow, plan_rows, ranked, results_csv, results_json
from nanovllm_teach.sim.prices import gpu_prices, parse_price, read_prices_file
from nanovllm_teach.sim.published import MIN_FITTED_CASES, fitted_cases, is_fitted

MEMORY_HEADER = Text(en="what one GPU of each candidate holds ({model}, {max_model_len}-token context):",
                     zh="每个候选配置的单块 GPU 能放下什么（{model}，上下文 {max_model_len} 个 token）：")
DOES_NOT_FIT = Text(en="does not fit: {why}", zh="放不下：{why}")
SEARCHING = Text(en="searching {n} candidates for the highest rate each sustains with {slo}: {steps} probes each "
                    "of {probe} requests after {warmup} warm-up requests ({where})",
                 zh="为 {n} 个候选配置搜索各自在 {slo} 下能承受的最高速率：每个 {steps} 次探测，每次在 {warmup} 个"
                    "预热请求之后测量 {probe} 个请求（{where}）")
ON_RAY = Text(en="on Ray", zh="在 Ray 上运行")
HERE = Text(en="in this process", zh="在本进程中运行")
CHEAPEST = Text(en="cheapest for {rate:g} requests/s: {label}, {gpus} GPUs, ${cost:.2f} per hour, sustains "
                   "{sustained:g} requests/s ({replica:g} per replica)",
                zh="达到 {rate:g} 个请求/秒的最便宜配置：{label}，{gpus} 块 GPU，每小时 {cost:.2f} 美元，可承受 "
                   "{sustained:g} 个请求/秒（每个副本 {replica:g}）")
NONE_REACHES = Text(en="no configuration of this space sustains {rate:g} requests/s with {slo}; the most any "
                       "sustains is {most:g}: widen the space (more replicas, other GPUs) or relax the SLO",
                    zh="这个搜索空间里没有配置能在 {slo} 下承受 {rate:g} 个请求/秒；最高只有 {most:g}：请扩大搜索"
                       "空间（更多副本、其他 GPU）或放宽 SLO")
RUNNERS_UP = Text(en="runners-up (cheapest first):", zh="其余候选（按成本从低到高）：")
REPRODUCE = Text(en="one replica of it at its sustained rate, simulated: {command}",
                 zh="以可承受速率模拟它的一个副本：{command}")
NO_COMMAND = Text(en="(a trace's workload: simulate cannot serve it, so no command reproduces a row)",
                 zh="（工作负载来自 trace：simulate 无法直接服务它，所以没有能复现某一行的命令）")
WROTE = Text(en="{what}: {path}", zh="{what}：{path}")
NO_FP8_SKIPPED = Text(en="--quantization fp8: skipped on {gpus}, which have no FP8 tensor cores",
                      zh="--quantization fp8：已跳过 {gpus}，它们没有 FP8 Tensor Core")
LOG_HINT = Text(en="probes logged in {path}: run the same command again to resume a stopped search",
                zh="探测结果记录在 {path}：搜索中断后，再次运行同一命令即可继续")


def add_plan_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``plan`` subcommand on ``subparsers`` (what ``add_subparsers`` returned)."""
    plan = subparsers.add_parser("plan", help=say(Text(
        en="find the cheapest configuration that meets a latency SLO at a rate",
        zh="找出在给定速率下满足延迟 SLO 的最便宜配置")))
    plan.add_argument("--model", default="llama-3.1-8b", help=say(Text(
        en="a shipped shape or a folder with a config.json", zh="自带的模型形状，或含 config.json 的文件夹")))
    plan.add_argument("--rate", type=float, required=True, help=say(Text(en="the target rate, requests per second",
                                                                         zh="目标速率，每秒请求数")))
    load = plan.add_argument_group(say(Text(en="the workload (each probe's)", zh="工作负载（每次探测的）")))
    load.add_argument("--prompt-lens", default="sharegpt-prompt", help=say(Text(en="as simulate's --prompt-lens",
                                                                                zh="同 simulate 的 --prompt-lens")))
    load.add_argument("--output-lens", default="sharegpt-output", help=say(Text(en="as simulate's --output-lens",
                                                                                zh="同 simulate 的 --output-lens")))
    load.add_argument("--workload-trace", default=None, metavar="FILE", help=say(Text(
        en="a TEACHING trace whose finished requests are the workload: their lengths, and their gaps scaled to each "
           "probe's rate (instead of --prompt-lens/--output-lens)",
        zh="用一个 TEACHING trace 里已完成的请求作为工作负载：沿用它们的长度，到达间隔按每次探测的速率缩放"
           "（代替 --prompt-lens/--output-lens）")))
    load.add_argument("--max-model-len", type=positive_int, default=8192)
    load.add_argument("--warmup-requests", type=int, default=200, help=say(Text(
        en="requests before the measured ones (200)", zh="正式测量之前先发的请求数（200）")))
    load.add_argument("--probe-requests", type=positive_int, default=1000, help=say(Text(
        en="measured requests (>= 1000)", zh="参与测量的请求数（>= 1000）")))
    load.add_argument("--seed", type=int, default=0)
    slo = plan.add_argument_group(say(Text(en="the SLO", zh="SLO")))
    slo.add_argument("--ttft-ms", type=float, default=1000.0, help=say(Text(
        en="TTFT limit, from arrival (1000)", zh="首 token 延迟的上限，从到达时算起（1000）")))
    slo.add_argument("--tpot-ms", type=float, default=50.0, help=say(Text(en="TPOT limit (50)",
                                                                          zh="每个输出 token 的时间的上限（50）")))
    slo.add_argument("--ttft-quantile", choices=list(QUANTILES), default="p99")
    slo.add_argument("--tpot-quantile", choices=list(QUANTILES), default="p99")
    slo.add_argument("--goodput", type=float, default=None, metavar="SHARE", help=say(Text(
        en="instead of the quantiles: this share of requests meets both limits at once",
        zh="不用分位数，改为：这个比例的请求同时满足两个上限")))
    space = plan.add_argument_group(say(Text(en="the space (comma-separated lists)", zh="搜索空间（逗号分隔的列表）")))
    space.add_argument("--gpus", default=None, help=say(Text(en="GPUs (default: every priced one)",
                                                             zh="GPU（默认：所有有价格的 GPU）")))
    space.add_argument("--tp", default="1,2,4", help=say(Text(en="tensor-parallel degrees (1,2,4)",
                                                              zh="张量并行的并行度（1,2,4）")))
    space.add_argument("--replicas", default="1,2,3,4,6,8", help=say(Text(en="replica counts (1,2,3,4,6,8)",
                                                                          zh="副本数（1,2,3,4,6,8）")))
    space.add_argument("--max-num-seqs", default="128,256,512", help="(128,256,512)")
    space.add_argument("--max-num-batched-tokens", default="8192,16384", help="(8192,16384)")
    space.add_argument("--quantization", default="none", help=say(Text(
        en="the weights: none (16-bit) and/or fp8, as vLLM's --quantization fp8; fp8 is skipped on GPUs without "
           "FP8 tensor cores (none)",
        zh="权重：none（16 位）和/或 fp8，即 vLLM 的 --quantization fp8；没有 FP8 Tensor Core 的 GPU 会跳过 fp8"
           "（默认：none）")))
    space.add_argument("--serving-engine", choices=SERVING_ENGINES, default=None, help=say(Text(
        en="as simulate's --serving-engine: whose collectives' cost every probe takes (default: one fit over every "
           "published engine's runs)",
        zh="同 simulate 的 --serving-engine：每次探测取哪个引擎的集合通信开销（默认：用所有公开引擎的案例一起拟合）")))
    cost = plan.add_argument_group(say(Text(en="the cost", zh="成本")))
    cost.add_argument("--price", action="append", default=[], metavar="GPU=USD", help=say(Text(
        en="a GPU's price per hour", zh="一块 GPU 每小时的价格")))
    cost.add_argument("--prices", default=None, metavar="FILE", help=say(Text(
        en="a JSON object of GPU -> USD per hour", zh="一个 JSON 对象：GPU -> 每小时美元价格")))
    run = plan.add_argument_group(say(Text(en="the search", zh="搜索")))
    run.add_argument("--resolution", type=float, default=0.05, help=say(Text(
        en="how close to the highest sustained rate, as a share of the saturated rate (0.05)",
        zh="离最高可持续速率要多近，以饱和速率的比例计（0.05）")))
    run.add_argument("--address", default=None, help=say(Text(
        en="a Ray cluster's address (default: a local Ray, started here); a cluster started with ray start --head "
           "asks for its token: set RAY_AUTH_MODE=token",
        zh="Ray 集群的地址（默认：在本机启动一个本地 Ray）；用 ray start --head 启动的集群会要求令牌："
           "请设置 RAY_AUTH_MODE=token")))
    run.add_argument("--serial", action="store_true", help=say(Text(
        en="run the probes in this process, without Ray", zh="在本进程内运行探测，不用 Ray")))
    run.add_argument("--log", default=None, help=say(Text(
        en="the probes' log, to resume from (default: plan-log.jsonl beside --out, else in this folder)",
        zh="探测日志，可从中继续（默认：--out 旁边的 plan-log.jsonl，没有 --out 则在当前文件夹）")))
    run.add_argument("--top", type=positive_int, default=5, help=say(Text(en="runners-up to print (5)",
                                                                          zh="打印的候补配置个数（5）")))
    out = plan.add_argument_group(say(Text(en="outputs", zh="输出")))
    out.add_argument("--out", default=None, help=say(Text(en="every row as .json or .csv",
                                                          zh="把每一行写成 .json 或 .csv")))
    out.add_argument("--picture", default=None, help=say(Text(en="the Pareto picture (.png, .svg or .pdf)",
                                                              zh="帕累托图（.png、.svg 或 .pdf）")))
    plan.set_defaults(func=_plan)
    return plan


def _ints(spec: str, option: str) -> list[int]:
    try:
        values = [int(x) for x in spec.split(",")]
    except ValueError:
        raise ValueError(say(NOT_INTS, option=option, spec=spec)) from None
    if not values or min(values) < 1 or len(set(values)) != len(values):
        raise ValueError(say(NOT_DISTINCT_INTS, option=option, spec=spec))
    return values


def _space(args: argparse.Namespace, prices: dict[str, float]) -> list[Candidate]:
    gpus = args.gpus.split(",") if args.gpus else [name for name in DEVICES if name in prices]
    for gpu in gpus:
        if gpu not in DEVICES:
            raise ValueError(say(UNKNOWN_GPU, gpu=gpu, gpus=", ".join(DEVICES)))
        if gpu not in prices:
            raise ValueError(say(GPU_WITHOUT_PRICE, gpu=gpu))
    quantizations = _quantizations(args.quantization)
    without_fp8 = [gpu for gpu in gpus if DEVICES[gpu].fp8_flops is None]
    if quantizations == ["fp8"] and len(without_fp8) == len(gpus):
        raise ValueError(say(NO_FP8_CANDIDATE, spec=args.quantization, gpus=", ".join(gpus),
                             fp8=", ".join(name for name, device in DEVICES.items() if device.fp8_flops)))
    if "fp8" in quantizations and without_fp8:
        print(say(NO_FP8_SKIPPED, gpus=", ".join(without_fp8)))
    return [Candidate(gpu, tp, seqs, tokens, q) for gpu in gpus for q in quantizations
            if q is None or gpu not in without_fp8 for tp in _ints(args.tp, "--tp")
            for seqs in _ints(args.max_num_seqs, "--max-num-seqs")
            for tokens in _ints(args.max_num_batched_tokens, "--max-num-batched-tokens")]


def _quantizations(spec: str) -> list[str | None]:
    """``--quantization``'s list: ``none`` (16-bit weights) and the engine's quantizations, each once."""
    names = spec.split(",")
    choices = ("none", *QUANTIZATIONS)
    if not names or len(set(names)) != len(names) or not set(names) <= set(choices):
        raise ValueError(say(BAD_QUANTIZATIONS, choices=", ".join(choices), spec=repr(spec)))
    return [None if name == "none" else name for name in names]


def _fit_table(fits: dict[Candidate, MemoryFit]) -> str:
    lines = [f"  {'GPU':16} {'TP':>3} {'seqs':>5} {'tokens':>6} {'weights/GPU':>12} {'KV blocks':>9} "
             f"{'longest':>8}"]
    for c, fit in fits.items():
        tail = f"  {say(DOES_NOT_FIT, why=fit.problem)}" if fit.problem else ""
        gpu = f"{c.hardware} {c.quantization}" if c.quantization else c.hardware
        lines.append(f"  {gpu:16} {c.tensor_parallel_size:>3} {c.max_num_seqs:>5} {c.max_num_batched_tokens:>6} "
                     f"{fit.weights_gib:>8.1f} GiB {fit.kv_blocks:>9} {fit.longest_tokens:>8}{tail}")
    return "\n".join(lines)


def _rows_table(rows: list[PlanRow]) -> str:
    lines = [f"  {'configuration':44} {'GPUs':>4} {'$/hour':>8} {'req/s':>8}"]
    for row in rows:
        lines.append(f"  {row.label:44} {row.gpus:>4} {row.cost_per_hour:>8.2f} {row.sustained_rate:>8.4g}")
    return "\n".join(lines)


def _plan(args: argparse.Namespace) -> int:
    overrides = read_prices_file(args.prices) if args.prices else {}
    overrides |= dict(parse_price(spec) for spec in args.price)
    prices = gpu_prices(overrides)
    if not args.rate > 0:
        raise ValueError(say(BAD_TARGET_RATE, value=args.rate))
    shape = load_shape(args.model)
    recorded = read_recorded_requests(args.workload_trace) if args.workload_trace else None
    workload = PlanWorkload(args.model, args.prompt_lens, args.output_lens,
                            min(args.max_model_len, shape.max_position_embeddings), args.warmup_requests,
                            args.probe_requests, args.seed, recorded, args.serving_engine)
    objective = Objective(args.ttft_ms, args.tpot_ms, args.ttft_quantile, args.tpot_quantile, args.goodput)
    steps = search_steps(args.resolution)
    replicas = _ints(args.replicas, "--replicas")
    candidates = _space(args, prices)
    out = writable_file(args.out, "--out") if args.out else None
    if out is not None and out.suffix.lower() not in (".json", ".csv"):
        raise ValueError(say(PLAN_OUT_SUFFIX, path=args.out))
    picture = writable_file(args.picture, "--picture", picture=True) if args.picture else None
    log = writable_file(args.log, "--log") if args.log else (
        (out.parent if out else Path(".")) / "plan-log.jsonl")
    fits = {c: memory_fit(c, workload) for c in candidates}
    print(say(MEMORY_HEADER, model=shape.name, max_model_len=workload.max_model_len))
    print(_fit_table(fits))
    for gpu in dict.fromkeys(c.hardware for c in candidates):
        if not is_fitted(gpu):
            print(say(UNFITTED, device=gpu, n=fitted_cases(gpu), least=MIN_FITTED_CASES))
    searched = [c for c in candidates if fits[c].problem is None]
    print(say(SEARCHING, n=len(searched), slo=objective.describe(), steps=steps + 1, probe=workload.probe_requests,
              warmup=workload.warmup_requests, where=say(HERE if args.serial else ON_RAY)))
    from nanovllm_teach.plan.search import run_searches  # tqdm, and Ray when it runs

    searches = run_searches(searched, workload, objective, steps, log_path=log, use_ray=not args.serial,
                            address=args.address)
    rows = plan_rows(searches, fits, workload, replicas, prices)
    best = ranked(rows, args.rate)
    if best:
        top = best[0]
        print(say(CHEAPEST, rate=args.rate, label=top.label, gpus=top.gpus, cost=top.cost_per_hour,
                  sustained=top.sustained_rate, replica=top.replica_rate))
        print("  " + (say(REPRODUCE, command=top.command) if top.command else say(NO_COMMAND)))
        if len(best) > 1:
            print(say(RUNNERS_UP))
            print(_rows_table(best[1:args.top + 1]))
    else:
        print(say(NONE_REACHES, rate=args.rate, slo=objective.describe(),
                  most=max((row.sustained_rate for row in rows), default=0.0)))
    if out is not None:
        text = results_csv(rows) if out.suffix.lower() == ".csv" else results_json(rows, workload, objective,
                                                                                    args.rate, steps)
        out.write_text(text, encoding="utf-8")
        print(say(WROTE, what="--out", path=out))
    if picture is not None:
        from nanovllm_teach.cli.arguments import save_picture
        from nanovllm_teach.viz.pareto import plot_pareto

        save_picture(plot_pareto(rows, args.rate, best[0] if best else None, shape.name), picture, dpi=120)
        print(say(WROTE, what="--picture", path=picture))
    print(say(LOG_HINT, path=log))
    return 0
