"""Simulator benchmark: a sanity check against a published GPU figure, and how fast a large simulation runs.

1. **nano-vllm's README benchmark, predicted.** The nano-vllm repository reports, for Qwen3-0.6B on an
   RTX 4070 Laptop (8 GB), 256 requests with input and output lengths uniform in 100..1024, all submitted
   at once, ``ignore_eos``: 133,966 output tokens in 93.41 s, 1434.13 tok/s. The same workload (our own
   draw of it: lengths from ``random.Random(--seed)``) goes through the real Scheduler and BlockManager on
   a ``SimulatedRunner`` with the ``rtx-4070-laptop`` device, nano-vllm's settings (``max_model_len`` 4096,
   16384 batched tokens, 512 sequences, 256-token blocks, ``gpu_memory_utilization`` 0.9, CUDA graphs) and
   the default efficiency factors, which are the same for every GPU. Printed: the predicted output tok/s
   for ``--nano-seeds`` draws of the workload, their median and its error against the reported figure.
2. **Scale.** ``--requests`` requests (default 10,000) of ``--model`` (Qwen3-8B) on ``--hardware`` (H100
   SXM) arriving as a Poisson process at ``--rate`` requests/s, chat-like lengths (log-normals fitted to a
   public chat data set, clipped to fit ``--max-model-len``), EOS at each answer's length, every event kept
   in memory by a ``TraceRecorder`` (and streamed to ``--trace`` if given). Printed: wall and CPU seconds
   for building the workload and for the simulation (everything from building the runner to the last
   step), the simulated duration, throughput, TTFT p50/p99, TPOT p50 and steps by bound.

Usage: ``python benchmarks/bench_sim.py`` (both parts), ``--part nano-vllm`` or ``--part scale``.
"""

from __future__ import annotations

import argparse
import statistics
import time

from nanovllm_teach.sim.cost_model import Efficiency, load_shape
from nanovllm_teach.sim.driver import SimulationResult, simulate
from nanovllm_teach.sim.hardware import get_device
from nanovllm_teach.sim.runner import SimulatedRunner
from nanovllm_teach.sim.workload import (AtOnce, Poisson, Uniform, chat_output_lengths, chat_prompt_lengths,
                                         make_workload)
from nanovllm_teach.trace.recorder import TraceRecorder

NANO_VLLM_REPORTED_TOK_S = 1434.13  # nano-vllm README, RTX 4070 Laptop (8GB), Qwen3-0.6B, 256 sequences


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _summary(result: SimulationResult) -> str:
    ttft = [r.ttft_s for r in result.requests.values()]
    tpot = [r.tpot_s for r in result.requests.values() if r.tpot_s is not None]
    bounds = ", ".join(f"{k} {v}" for k, v in sorted(result.steps_by_bound.items()))
    return (f"simulated {result.duration_s:.1f} s, {result.num_steps} steps ({result.num_prefill_steps} prefill; "
            f"by bound: {bounds}), {result.num_preemptions} preemptions\n"
            f"  output {result.output_tokens} tokens, {result.output_tokens_per_s:.0f} tok/s; "
            f"TTFT p50 {_percentile(ttft, 0.5) * 1e3:.0f} ms, p99 {_percentile(ttft, 0.99) * 1e3:.0f} ms; "
            f"TPOT p50 {statistics.median(tpot) * 1e3:.1f} ms")


def nano_vllm(seeds: list[int], num_requests: int) -> None:
    shape = load_shape("qwen3-0.6b")
    predicted = []
    for seed in seeds:
        runner = SimulatedRunner(shape, get_device("rtx-4070-laptop"), max_model_len=4096)
        workload = make_workload(num_requests, AtOnce(), Uniform(100, 1024), Uniform(100, 1024),
                                 vocab_size=shape.vocab_size, seed=seed)
        result = simulate(runner, workload, ignore_eos=True)
        predicted.append(result.output_tokens_per_s)
        print(f"nano-vllm README benchmark on rtx-4070-laptop, draw {seed}: {runner.num_kvcache_blocks} KV blocks "
              f"of 256 tokens")
        print("  " + _summary(result))
    if num_requests == 256:
        median = statistics.median(predicted)
        print(f"predicted {median:.0f} output tok/s (median of {len(seeds)} draws, {min(predicted):.0f}.."
              f"{max(predicted):.0f}), reported {NANO_VLLM_REPORTED_TOK_S:.0f}: "
              f"error {median / NANO_VLLM_REPORTED_TOK_S - 1:+.1%}")


def scale(args: argparse.Namespace) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    shape = load_shape(args.model)
    output_hi = args.max_model_len // 4
    workload = make_workload(args.requests, Poisson(args.rate), chat_prompt_lengths(hi=args.max_model_len - output_hi),
                             chat_output_lengths(hi=output_hi), vocab_size=shape.vocab_size, seed=args.seed)
    built = time.perf_counter() - wall, time.process_time() - cpu
    wall, cpu = time.perf_counter(), time.process_time()
    device = get_device(args.hardware)
    recorder = TraceRecorder(args.trace)
    recorder.open({"schema": "nanovllm_teach.trace", "version": 1, "model": {"name": shape.name},
                   "device": device.name, "simulated": {"hardware": device.describe(),
                                                        "efficiency": Efficiency().to_dict()}})
    runner = SimulatedRunner(shape, device, max_model_len=args.max_model_len, recorder=recorder)
    result = simulate(runner, workload, recorder=recorder)
    recorder.close()
    ran = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{args.requests} requests of {shape.name} on {args.hardware}, Poisson {args.rate}/s, "
          f"{runner.num_kvcache_blocks} KV blocks of 256 tokens")
    print(f"  workload built in {built[0]:.1f} s wall ({built[1]:.1f} s CPU); simulated with the real scheduler "
          f"in {ran[0]:.1f} s wall ({ran[1]:.1f} s CPU), {len(recorder.events)} events recorded"
          + (f" and written to {args.trace}" if args.trace else " in memory"))
    print("  " + _summary(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("all", "nano-vllm", "scale"), default="all")
    parser.add_argument("--seed", type=int, default=0, help="the scale run's workload seed")
    parser.add_argument("--nano-seeds", type=int, default=5, help="draws of the nano-vllm workload (seeds 0..N-1)")
    parser.add_argument("--nano-requests", type=int, default=256)
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=4.0)
    parser.add_argument("--model", default="qwen3-8b")
    parser.add_argument("--hardware", default="h100-sxm")
    parser.add_argument("--max-model-len", type=int, default=8192)
    parser.add_argument("--trace", default=None, help="also stream the scale run's trace to this JSONL file")
    args = parser.parse_args()
    if args.part in ("all", "nano-vllm"):
        nano_vllm(list(range(args.nano_seeds)), args.nano_requests)
    if args.part in ("all", "scale"):
        scale(args)


if __name__ == "__main__":
    main()
