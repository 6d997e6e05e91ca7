"""Command line: ``simulate``, a workload through the real engine on a simulated device.

    nanovllm-teach simulate --model qwen3-8b --hardware h100-sxm --rate 8 --requests 2000 --out sim.jsonl
    nanovllm-teach simulate --model llama-3.1-70b --hardware h100-sxm --quantization fp8 --rate 1
    nanovllm-teach simulate --list

Before anything is built or drawn it checks the settings, estimates the KV cache the device will hold and the
memory this machine will need (``sim/budget.py``), and refuses what cannot fit. Then it draws the workload
(``workload/requests.py``: arrivals or ``--concurrency`` clients, prompt and output lengths, by default
ShareGPT's as vLLM's benchmark sends them, shared prefixes, one seed), builds ``LLM(model, runner="simulated",
hardware=...)`` with the engine settings given, serves the workload (``serve_workload``, with a progress bar,
through the device's fitted API server where its factors have one: ``workload/arrivals.py``) and prints
what a serving benchmark prints: throughput, TTFT p50/p99, TPOT p50, and how many steps each bound decided.
``--out`` streams the trace, which ``replay``, ``compare`` and ``diff`` read like any other.
A mistake raises ValueError (one line, exit status 2, from ``cli.main``).

Nothing here imports torch until the engine is built, except to measure this machine's memory for
``--hardware this-cpu``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from nanovllm_teach.cli.arguments import CANNOT_BE_WRITTEN, ENGINE_SETTINGS
from nanovllm_teach.cli.messages import (BAD_ADMIT_EVERY, BAD_CONCURRENCY, BAD_SHARED_PREFIX, LENGTHS_TOO_LONG,
                                         ONE_ARRIVAL_OPTION, OUT_IS_A_FOLDER, PREFIX_TOO_LONG,
                                         TOO_MANY_PREFIX_GROUPS)
from nanovllm_teach.i18n import Text, say
from nanovllm_teach.settings import QUANTIZATIONS, SERVING_ENGINES, Settings
from nanovllm_teach.sim.budget import (check_host_memory, check_kv_blocks, estimated_kv_blocks, host_bytes,
                                       kv_block_bytes_per_rank)
from nanovllm_teach.sim.cost_model import DTYPE_BYTES, ModelShape, StepCostModel, load_shape, shape_names
from nanovllm_teach.sim.efficiency import Efficiency
from nanovllm_teach.sim.hardware import CPU_DEVICE_NAME, DEVICES, GIB, device_names, get_device
from nanovllm_teach.sim.published import MIN_FITTED_CASES, fitted_cases, is_fitted, load_cases
from nanovllm_teach.trace.console import pad
from nanovllm_teach.trace.recorder import TraceRecorder
from nanovllm_teach.utils.threads import prefer_passive_wait
from nanovllm_teach.workload.requests import SHAREGPT_SOURCE, Lengths, SharedPrefix, make_workload, parse_arrivals, parse_lengths

TRACE_HINT = Text(
    en="trace: {path}\n  a summary and the first steps: nanovllm-teach replay {path}  (every step: --all)\n"
       "  the replay page: nanovllm-teach replay {path} --html {page}",
    zh="trace：{path}\n  摘要和前几步：nanovllm-teach replay {path}  （逐步列出：--all）\n"
       "  回放页：nanovllm-teach replay {path} --html {page}")
RAN = Text(en="{requests} requests of {model} on {hardware} (tp={tp}{weights}), {blocks} KV blocks of {block_size} "
              "tokens; simulated in {seconds:.1f} s",
           zh="{model} 在 {hardware}（tp={tp}{weights}）上处理了 {requests} 个请求，{blocks} 个 KV 块，每块 {block_size} "
              "个 token；模拟用时 {seconds:.1f} 秒")
FP8_WEIGHTS = Text(en=", fp8 weights", zh="，FP8 权重")
ENGINE_COSTS = Text(en=", {engine}'s serving costs", zh="，{engine} 的服务开销")
SIMULATED = Text(en="simulated {summary}", zh="模拟结果：{summary}")


def add_simulate_parser(subparsers: Any) -> argparse.ArgumentParser:
    """The ``simulate`` subcommand on ``subparsers`` (what ``add_subparsers`` returned)."""
    sim = subparsers.add_parser("simulate", help=say(Text(
        en="run a workload through the real engine on a simulated GPU",
        zh="在模拟的 GPU 上用真实引擎运行一个工作负载")))
    sim.add_argument("--list", action="store_true", help=say(Text(
        en="list the shipped model shapes and the devices, then stop", zh="列出自带的模型形状和设备后结束")))
    sim.add_argument("--model", default="qwen3-8b", help=say(Text(
        en="a shipped shape ({shapes}) or a folder with a config.json",
        zh="自带的模型形状（{shapes}）或含 config.json 的文件夹"), shapes=", ".join(shape_names())))
    sim.add_argument("--hardware", default="h100-sxm", help=say(Text(en="one of {devices}", zh="可选：{devices}"),
                                                                devices=", ".join(device_names())))
    sim.add_argument("--factors", default=None, help=say(Text(en="a JSON file of fitted efficiency factors",
                                                              zh="拟合好的效率系数的 JSON 文件")))
    sim.add_argument("--out", default=None, help=say(Text(en="record the trace to this JSONL file",
                                                          zh="把 trace 录制到这个 JSONL 文件")))
    load = sim.add_argument_group(say(Text(en="the workload", zh="工作负载")))
    load.add_argument("--requests", type=int, default=1000, help=say(Text(en="how many requests (default: 1000)",
                                                                          zh="请求数（默认：1000）")))
    load.add_argument("--rate", type=float, default=None, help=say(Text(en="Poisson arrivals, requests per second",
                                                                        zh="泊松到达，每秒请求数")))
    load.add_argument("--arrivals", default=None, help=say(Text(
        en="poisson:RATE, burst:SIZE:EVERY_S or at-once (default: poisson:4)",
        zh="poisson:RATE、burst:SIZE:EVERY_S 或 at-once（默认：poisson:4）")))
    load.add_argument("--concurrency", type=int, default=None, metavar="N", help=say(Text(
        en="closed loop instead of arrivals: N clients, each sending its next request when its last one finishes "
           "(a serving benchmark's --max-concurrency)",
        zh="用闭环代替到达过程：N 个客户端，各自在上一个请求完成后发出下一个（即服务基准测试的 "
           "--max-concurrency）")))
    load.add_argument("--prompt-lens", default="sharegpt-prompt", help=say(Text(
        en="fixed:N, uniform:LO:HI, lognormal:MEDIAN:P90 or sharegpt-prompt (the default: {source})",
        zh="fixed:N、uniform:LO:HI、lognormal:MEDIAN:P90 或 sharegpt-prompt（默认：{source}）"),
        source=say(SHAREGPT_SOURCE)))
    load.add_argument("--output-lens", default="sharegpt-output", help=say(Text(
        en="the same forms, or sharegpt-output (the default)", zh="同样的写法，或 sharegpt-output（默认）")))
    load.add_argument("--shared-prefix", default=None, metavar="GROUPS:LEN", help=say(Text(
        en="every prompt starts with one of GROUPS common prefixes of LEN tokens",
        zh="每个 prompt 都以 GROUPS 个公共前缀之一开头，前缀长 LEN 个 token")))
    load.add_argument("--ignore-eos", action="store_true", help=say(Text(
        en="every request runs to its whole output length and finishes by length (nano-vllm's benchmark)",
        zh="每个请求都生成到完整的输出长度、因长度而结束（nano-vllm 的基准测试就是这样）")))
    load.add_argument("--seed", type=int, default=0)
    sim.add_argument("--admit-every", type=int, default=1, metavar="K", help=say(Text(
        en="admit arrived requests only every K steps, as vLLM's multi-step scheduling (--num-scheduler-steps K) "
           "did; off (1) by default",
        zh="每 K 步才接纳一次已到达的请求，就像 vLLM 的多步调度（--num-scheduler-steps K）那样；默认关闭（1）")))
    engine = sim.add_argument_group(say(ENGINE_SETTINGS))
    engine.add_argument("--max-model-len", type=int, default=8192)
    engine.add_argument("--max-num-seqs", type=int, default=512)
    engine.add_argument("--max-num-batched-tokens", type=int, default=None)
    engine.add_argument("--block-size", type=int, default=256)
    engine.add_argument("--num-kvcache-blocks", type=int, default=None)
    engine.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    engine.add_argument("--tensor-parallel-size", type=int, default=1)
    engine.add_argument("--quantization", choices=QUANTIZATIONS, default=None, help=say(Text(
        en="fp8: the linear layers' weights in FP8, as vLLM's --quantization fp8 (GPUs with FP8 tensor cores: "
           "see --list); default: 16-bit weights",
        zh="fp8：线性层的权重用 FP8，即 vLLM 的 --quantization fp8（需要有 FP8 Tensor Core 的 GPU，见 "
           "--list）；默认：16 位权重")))
    engine.add_argument("--serving-engine", choices=SERVING_ENGINES, default=None, help=say(Text(
        en="the served engine whose own costs to take (its collectives' fixed cost; see --list); default: one fit "
           "over every published engine's runs",
        zh="取哪个服务引擎自己的开销（它的集合通信固定开销；见 --list）；默认：用所有公开引擎的案例一起拟合")))
    engine.add_argument("--policy", default="continuous", help=say(Text(en="continuous or static",
                                                                          zh="continuous 或 static")))
    engine.add_argument("--no-prefix-caching", action="store_true")
    engine.add_argument("--enforce-eager", action="store_true", help=say(Text(en="no CUDA graphs for decode",
                                                                             zh="解码不用 CUDA Graph")))
    sim.set_defaults(func=_simulate)
    return sim


UNFITTED = Text(
    en="{device} is unfitted: its efficiency factors were fitted on {n} published case(s), fewer than {least} (none: "
       "the defaults); its figures are a roofline's estimate, not checked against a real engine on it",
    zh="{device} 未经拟合：它的效率系数只用 {n} 个公开案例拟合过，少于 {least} 个（0 个即为默认值）；它的数字是屋顶线模型的"
       "估计，没有和这种 GPU 上的真实引擎对照过")


LIST_SHAPES = Text(en="model shapes (config.json only):", zh="模型形状（只有 config.json）：")
LIST_SHAPE = Text(en="  {name:12} {params:5.1f} B params, {layers} layers, {kv_heads} KV heads of {head_dim}",
                  zh="  {name:12} {params:5.1f} B 参数，{layers} 层，{kv_heads} 个 KV 头，每个 {head_dim} 维")
LIST_HARDWARE = Text(en="hardware (datasheet peaks; this-cpu is measured when used; factors fitted on published cases, "
                        "unfitted below {least}):",
                     zh="硬件（数据手册上的峰值；this-cpu 在用到时实测；效率系数用公开案例拟合，少于 {least} 个即为未拟合）：")
FITTED_ON = Text(en="fitted on {n} cases", zh="用 {n} 个案例拟合")
UNFITTED_ON = Text(en="unfitted ({n} of {least} fitted cases)", zh="未拟合（拟合案例 {n} 个，至少要 {least} 个）")
NO_FP8 = Text(en="no fp8", zh="无 fp8")
LIST_THIS_CPU = Text(en="  this-cpu         this machine's CPU, float32 (measured: about two seconds)",
                     zh="  this-cpu         本机的 CPU，float32（实测，约两秒）")
LIST_ENGINES = Text(en="serving engines (--serving-engine: an engine's own cost of a collective, fitted on its runs; "
                       "without it, {allreduce_us:.1f} us on an H100, one fit over every engine's runs):",
                    zh="服务引擎（--serving-engine：某个引擎自己的集合通信开销，用它自己的案例拟合；不给时，H100 上是 "
                       "{allreduce_us:.1f} µs，用所有引擎的案例一起拟合）：")
LIST_ENGINE = Text(en="  {name:16} {what}: all-reduce fixed cost {allreduce_us:.1f} us",
                   zh="  {name:16} {what}：all-reduce 固定开销 {allreduce_us:.1f} µs")
SERVING_ENGINE_SOURCES = {
    "vllm-0.5": Text(en="vLLM 0.5.4, as LambdaLabsML/vllm-benchmark ran it",
                     zh="vLLM 0.5.4，LambdaLabsML/vllm-benchmark 的测法"),
    "vllm-0.6": Text(en="vLLM 0.6.0 with --num-scheduler-steps 10, as sglang's benchmark_vllm_060 ran it",
                     zh="vLLM 0.6.0 加 --num-scheduler-steps 10，sglang 的 benchmark_vllm_060 的测法"),
}


def _list_choices() -> str:
    lines = [say(LIST_SHAPES)]
    for name in shape_names():
        shape = load_shape(name)
        lines.append(say(LIST_SHAPE, name=name, params=shape.num_params / 1e9, layers=shape.num_layers,
                         kv_heads=shape.num_kv_heads, head_dim=shape.head_dim))
    lines.append(say(LIST_HARDWARE, least=MIN_FITTED_CASES))
    cases = load_cases()
    for device in DEVICES.values():
        n = fitted_cases(device.name, cases)
        fit = say(FITTED_ON if n >= MIN_FITTED_CASES else UNFITTED_ON, n=n, least=MIN_FITTED_CASES)
        fp8 = f"{device.fp8_flops / 1e12:6.1f} fp8" if device.fp8_flops else pad(say(NO_FP8), 10, right=True)
        lines.append(f"  {device.name:16} {device.peak_flops / 1e12:6.1f} TFLOP/s {device.dtype}, {fp8}, "
                     f"{device.memory_bandwidth / 1e9:6.0f} GB/s, {device.memory_bytes / GIB:4.0f} GiB, "
                     f"{device.interconnect}; {fit}")
    lines.append(say(LIST_THIS_CPU))
    lines.append(say(LIST_ENGINES, allreduce_us=Efficiency.for_device("h100-sxm").allreduce_latency_s * 1e6))
    for name in SERVING_ENGINES:
        lines.append(say(LIST_ENGINE, name=name, what=say(SERVING_ENGINE_SOURCES[name]),
                         allreduce_us=Efficiency.for_device("h100-sxm", name).allreduce_latency_s * 1e6))
    return "\n".join(lines)


def _shared_prefix(spec: str | None, num_requests: int, max_model_len: int) -> SharedPrefix | None:
    if spec is None:
        return None
    try:
        groups, length = (int(x) for x in spec.split(":"))
    except ValueError:
        raise ValueError(say(BAD_SHARED_PREFIX, spec=spec)) from None
    shared = SharedPrefix(groups, length)
    if groups > num_requests:
        raise ValueError(say(TOO_MANY_PREFIX_GROUPS, spec=spec, groups=groups, num_requests=num_requests))
    if length + 2 > max_model_len:
        raise ValueError(say(PREFIX_TOO_LONG, spec=spec, length=length, max_model_len=max_model_len))
    return shared


def _lengths(spec: str, option: str, clip: int, most: int) -> Lengths:
    """``clip``: where the log-normals' tails are cut; ``most``: the longest a drawn length may be."""
    lengths = parse_lengths(spec, hi=clip)
    if lengths.longest > most:
        raise ValueError(say(LENGTHS_TOO_LONG, option=option, spec=spec, longest=lengths.longest, most=most))
    return lengths


def _workload(args: argparse.Namespace, vocab_size: int, max_model_len: int, num_blocks: int) -> list:
    """The workload, drawn once everything it will hold is known to fit in this machine's memory."""
    if sum(x is not None for x in (args.rate, args.arrivals, args.concurrency)) > 1:
        raise ValueError(say(ONE_ARRIVAL_OPTION))
    if args.concurrency is not None and args.concurrency < 1:
        raise ValueError(say(BAD_CONCURRENCY, value=args.concurrency))
    if not 1 <= args.admit_every <= 1024:
        raise ValueError(say(BAD_ADMIT_EVERY, value=args.admit_every))
    # A closed loop's requests arrive when the clients send them: drawn all at once, sent in order.
    arrivals = parse_arrivals("at-once" if args.concurrency is not None else
                              args.arrivals or f"poisson:{args.rate if args.rate is not None else 4}")
    shared = _shared_prefix(args.shared_prefix, args.requests, max_model_len)
    prefix_len = shared.prefix_len if shared else 0
    output_hi = max(1, max_model_len // 4)  # the tails of the default log-normals are clipped to fit
    prompt_hi = max(1, max_model_len - output_hi - prefix_len)
    prompts = _lengths(args.prompt_lens, "--prompt-lens", prompt_hi, max_model_len - 1 - prefix_len)
    outputs = _lengths(args.output_lens, "--output-lens", output_hi, max_model_len - 1)
    check_host_memory(host_bytes(args.requests, prefix_len + prompts.mean(), outputs.mean(), num_blocks,
                                 shared.num_groups * prefix_len if shared else 0))
    return make_workload(args.requests, arrivals, prompts, outputs, vocab_size=vocab_size, seed=args.seed,
                         shared_prefix=shared)


def _most_kv_blocks(args: argparse.Namespace, shape: ModelShape) -> int:
    """The KV blocks the engine can have: as many as asked (refused if the device could not hold them), or
    at most what the device's memory (this CPU: its KV cap) holds."""
    tp, block = args.tensor_parallel_size, args.block_size
    shape.check_tensor_parallel(tp)
    if args.hardware == CPU_DEVICE_NAME:
        if args.num_kvcache_blocks:
            return args.num_kvcache_blocks
        prefer_passive_wait()  # torch loads here, before the engine's config.py: libgomp reads the policy only then
        import torch  # this CPU is measured when the engine starts: torch is loaded then anyway

        from nanovllm_teach.utils.memory import auto_cpu_kv_cap, read_memory
        per_block = kv_block_bytes_per_rank(shape, DTYPE_BYTES["float32"], tp, block)  # this CPU runs float32
        max_len = min(args.max_model_len, shape.max_position_embeddings)
        # The real engine's CPU cap when cpu_kvcache_gib is not set (config.py): a share of what is available.
        cap, _ = auto_cpu_kv_cap(per_block, args.max_num_seqs * -(-max_len // block),
                                 read_memory(torch.device("cpu")).free // tp)
        return cap // per_block
    device = get_device(args.hardware)  # a datasheet device: plain data
    device.matmul_flops(args.quantization)  # FP8 weights on a GPU without FP8 are refused before anything is drawn
    if args.num_kvcache_blocks is not None:
        check_kv_blocks(shape, device, tp, block, args.num_kvcache_blocks)
        return args.num_kvcache_blocks
    batched = args.max_num_batched_tokens or (16384 if device.kind == "gpu" else 2048)
    cost_model = StepCostModel(shape, device, tensor_parallel_size=tp, quantization=args.quantization)
    return estimated_kv_blocks(cost_model, args.gpu_memory_utilization,
                               min(args.max_model_len, shape.max_position_embeddings), batched, args.max_num_seqs,
                               block)


def _simulate(args: argparse.Namespace) -> int:
    if args.list:
        print(_list_choices())
        return 0
    settings = dict(runner="simulated", hardware=args.hardware, sim_factors=args.factors,
                    max_model_len=args.max_model_len, max_num_seqs=args.max_num_seqs,
                    max_num_batched_tokens=args.max_num_batched_tokens, kvcache_block_size=args.block_size,
                    num_kvcache_blocks=args.num_kvcache_blocks, gpu_memory_utilization=args.gpu_memory_utilization,
                    tensor_parallel_size=args.tensor_parallel_size, scheduling_policy=args.policy,
                    enable_prefix_caching=not args.no_prefix_caching, enforce_eager=args.enforce_eager,
                    quantization=args.quantization, serving_engine=args.serving_engine)
    Settings.from_kwargs(settings)  # every setting's own check, before any is used
    if args.out and Path(args.out).is_dir():
        raise ValueError(say(OUT_IS_A_FOLDER, path=args.out))
    wall = time.perf_counter()
    # Everything is checked and the workload drawn before a file is opened or the engine built.
    shape = load_shape(args.model)
    max_model_len = min(args.max_model_len, shape.max_position_embeddings)
    workload = _workload(args, shape.vocab_size, max_model_len, _most_kv_blocks(args, shape))
    from nanovllm_teach.llm import LLM  # torch, only now
    from nanovllm_teach.workload.arrivals import serve_workload

    try:
        # The trace streams to its file only: a long run's events are not kept in memory too.
        llm = LLM(args.model, trace=TraceRecorder(args.out, keep_in_memory=False) if args.out else None, **settings)
    except OSError as error:  # the trace file: a folder, no permission, ...
        raise ValueError(say(CANNOT_BE_WRITTEN, option="--out", path=args.out, why=error.strerror or error)) from None
    try:
        result = serve_workload(llm, workload, ignore_eos=args.ignore_eos, answers=llm.answers,
                                concurrency=args.concurrency, progress=True, admit_every=args.admit_every,
                                server=llm.server)
    finally:
        llm.close()
    print(say(RAN, requests=args.requests, model=Path(llm.config.model).name, hardware=args.hardware,
              tp=args.tensor_parallel_size, weights=(say(FP8_WEIGHTS) if args.quantization else "") + (
                  say(ENGINE_COSTS, engine=args.serving_engine) if args.serving_engine else ""),
              blocks=llm.model_runner.num_kvcache_blocks, block_size=args.block_size,
              seconds=time.perf_counter() - wall))
    print(say(SIMULATED, summary=result.summary()))
    if args.hardware in DEVICES and args.factors is None and not is_fitted(args.hardware):
        print(say(UNFITTED, device=args.hardware, n=fitted_cases(args.hardware), least=MIN_FITTED_CASES))
    if args.out:
        print(say(TRACE_HINT, path=args.out, page=Path(args.out).with_suffix(".html")))
    return 0
