"""Simulator benchmark: calibration against the real engine on this CPU, a sanity check against a published GPU
figure, and how fast a large simulation runs. Every run is the real ``LLMEngine`` (``LLM(...,
runner="simulated", hardware=...)``: its own Scheduler and BlockManager) and ``run_workload``.

1. **Calibration on this machine** (``--part calibrate``; ``--save`` makes it the shipped calibration). The
   real engine runs the shipped model on this CPU as a server runs it (no trace recorded; ``--threads``
   torch threads; greedy, ``ignore_eos`` so each answer has its drawn length), after an unmeasured warm-up
   run, on two draws (seeds 0 and 1) of two workloads: ``--calib-requests`` requests all at once, prompt
   and output lengths uniform in 16..256 (big prefills, then decodes of shrinking batches; each draw runs
   ``--calib-repeats`` times and each step keeps its fastest time, the least disturbed by other work on a
   shared machine; the total is the fastest run's); and ``--calib-poisson-requests`` requests arriving as
   a Poisson process at ``--calib-rate`` per second, prompts 16..128 and answers 16..64 tokens long, run
   once (lone small prefills, some after the engine sat idle, some while it decodes: what a server at
   light load runs). Each step is timed from its start to the next step's start and kept with what it computed
   (``StepWork``). The simulated engine on ``this-cpu`` (peaks measured now) with the real run's KV cache
   size makes the same steps for the first workload (checked). The efficiency factors are fitted on draw 0
   of both (``nanovllm_teach/sim/calibrate.py``) and judged on draw 1: the median absolute per-step latency
   error (target < 20%) and the total wall-time error (target < 15%) of the first workload; for the
   arriving one, the medians of prefills after an idle wait, other prefills and decodes, measured and
   predicted, and the requests' TTFT and TPOT medians against the simulated engine on the same arrivals.
   The fitted factors are printed and written to ``--factors-out``, or with ``--save`` to
   ``nanovllm_teach/sim/this_cpu_factors.json`` (what ``hardware="this-cpu"`` uses without ``sim_factors``).
   Then the **served calibration**: both arriving draws again, through the server (``build_server``, the
   load generator of ``bench_serve.py`` in its own process, streamed), each step and the requests' TTFTs
   inside the engine read back from the trace the engine core writes (nothing reaches into the engine); the
   host terms alone are refitted on draw 0 (the device's shares kept: the same machine, more host work per
   step and per token), ``frontend_s`` is the client's TTFT median beyond the engine side's
   (what a request meets outside the engine), and both are judged on draw 1 (per step, and the requests'
   TTFT and TPOT medians at the client against the simulated engine with these factors); written beside the other as
   ``this_cpu_served_factors.json`` (``--save``) or ``--factors-out`` with ``.served.json``.
2. **nano-vllm's README benchmark, predicted** (``--part nano-vllm``). The nano-vllm repository reports, for
   Qwen3-0.6B on an RTX 4070 Laptop (8 GB), 256 requests with input and output lengths uniform in
   100..1024, all submitted at once, ``ignore_eos``: 133,966 output tokens in 93.41 s, 1434.13 tok/s. The
   same workload (our own draw of it: lengths from ``random.Random(seed)``) runs on the
   ``rtx-4070-laptop`` device with nano-vllm's settings (``max_model_len`` 4096, 16384 batched tokens, 512
   sequences, 256-token blocks, ``gpu_memory_utilization`` 0.9, CUDA graphs) and the default efficiency
   factors, which are the same for every GPU. Printed: the predicted output tok/s for ``--nano-seeds``
   draws, their median and its error against the reported figure.
3. **Scale** (``--part scale``). ``--requests`` requests (default 10,000) of ``--model`` (Qwen3-8B) on
   ``--hardware`` (H100 SXM) arriving as a Poisson process at ``--rate`` requests/s, ShareGPT-like lengths
   (``sharegpt_prompt_lengths`` and ``sharegpt_output_lengths``: the published means of vLLM's ShareGPT requests), EOS at each
   answer's length, every event kept in memory by a ``TraceRecorder`` (and streamed to ``--trace`` if
   given). Printed: wall and CPU seconds for
   building the workload and for the simulation (engine start-up to the last step), the simulated
   duration, throughput, TTFT p50/p99, TPOT p50 and steps by bound.

Usage: ``python benchmarks/bench_sim.py`` (every part), or ``--part calibrate|nano-vllm|scale``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from nanovllm_teach import LLM
from nanovllm_teach.assets import default_model_path
from nanovllm_teach.sim.calibrate import fit_efficiency, predict, relative_errors
from nanovllm_teach.sim.cost_model import StepWork, load_shape
from nanovllm_teach.sim.efficiency import THIS_CPU_FACTORS, THIS_CPU_SERVED_FACTORS
from nanovllm_teach.sim.hardware import get_device
from nanovllm_teach.workload.metrics import WorkloadResult
from nanovllm_teach.workload.requests import (AtOnce, Poisson, Uniform, make_workload, sharegpt_output_lengths,
                                              sharegpt_prompt_lengths)
from nanovllm_teach.trace.reader import Trace, load_trace
from nanovllm_teach.trace.recorder import TraceRecorder
from nanovllm_teach.trace.state import STATE_EVENTS, EngineState, ends_a_step, read_settings

NANO_VLLM_REPORTED_TOK_S = 1434.13  # nano-vllm README, RTX 4070 Laptop (8GB), Qwen3-0.6B, 256 sequences
FACTORS_FILE = THIS_CPU_FACTORS
SERVED_FACTORS_FILE = THIS_CPU_SERVED_FACTORS
CALIB_SETTINGS = dict(max_num_seqs=64, max_num_batched_tokens=4096, kvcache_block_size=256, max_model_len=1024)


def _real_run(workload: list, repeats: int = 1) -> tuple[WorkloadResult, list[StepWork], list[float], int]:
    """The real engine on this CPU, as a server runs it (no trace recorded), ``repeats`` times on fresh engines:
    the fastest run's result, its steps (``StepWork``: what the real runner computed, whether the step was
    the native decode call, whether the engine had waited for an arrival before it), each step's measured
    seconds (``_step_times``) and the KV cache size. Repeats must
    make the same steps (every request at once); each step keeps its fastest time, the least disturbed by
    the machine's other work."""
    runs = []
    for _ in range(repeats):
        llm = LLM(default_model_path(), **CALIB_SETTINGS)
        steps, times, waited = [], [], [False]
        run, step, wait = llm.model_runner.run, llm.step, llm.clock.wait_until

        def recording_run(batch):
            native = not batch.is_prefill and llm.model_runner.decode_paths.native is not None
            steps.append(StepWork([(len(seq.token_ids), seq.num_cached_tokens) for seq in batch.seqs], native=native,
                                  after_idle=waited[0]))
            waited[0] = False
            return run(batch)

        def timed_step():
            start = time.perf_counter()
            out = step()
            times.append((start, time.perf_counter()))
            return out

        def idle_wait(t_s: float) -> None:
            waited[0] = waited[0] or t_s > time.perf_counter()
            wait(t_s)

        llm.model_runner.run, llm.step, llm.clock.wait_until = recording_run, timed_step, idle_wait
        result = llm.run_workload(workload)
        llm.close()
        runs.append((result, steps, _step_times(steps, times)))
    assert all(steps == runs[0][1] for _, steps, _ in runs), "repeats made different steps"
    fastest = min(runs, key=lambda run: run[0].duration_s)[0]
    times = [min(each) for each in zip(*(times for _, _, times in runs))]
    return fastest, runs[0][1], times, llm.model_runner.num_kvcache_blocks


def _simulated(workload: list, num_blocks: int, factors: str | None = None) -> tuple[WorkloadResult, list[StepWork]]:
    """The same workload on the simulated engine (this CPU's peaks): its result and each step's work."""
    llm = LLM(default_model_path(), runner="simulated", hardware="this-cpu", num_kvcache_blocks=num_blocks,
              sim_factors=factors, **CALIB_SETTINGS)
    steps = []
    run = llm.model_runner.run

    def recording_run(batch):
        tokens = run(batch)
        steps.append(llm.model_runner.last_work)
        return tokens

    llm.model_runner.run = recording_run
    return llm.run_workload(workload), steps


def _served_run(workload: list) -> tuple[list[StepWork], list[float], list[dict], list[float]]:
    """The same engine inside the server (``build_server(live=False)``, as ``nanovllm-teach serve`` runs it: the
    engine in its own engine-core process), the workload sent by ``bench_serve.py``'s load generator in its
    own process, streamed, the engine core writing its trace: each step as the core ran it and its measured
    seconds (``_step_times``: the core's work between the steps included), the client's results
    (``first_s``, ``last_s``, ``usage`` per request) and the engine side's TTFTs. Nothing reaches into the
    engine: everything on its side is read back from the trace (``_trace_steps``) once the server has
    stopped, which completes it. Writing the trace is the core's work too, so the steps carry it, as those of
    ``nanovllm-teach serve --trace`` do."""
    from bench_serve import run_client  # the load generator: this directory's other script
    from nanovllm_teach.serve.build import BackgroundServer, build_server

    requests = [{"prompt": r.prompt_token_ids, "max_tokens": r.output_len, "arrival_s": r.arrival_s}
                for r in workload]
    with tempfile.TemporaryDirectory() as tmp:
        trace_path = Path(tmp) / "served.jsonl"
        server = BackgroundServer(build_server(trace=trace_path, live=False, **CALIB_SETTINGS))
        try:
            client = run_client(server.url, requests, True, Path(tmp))["results"]
        finally:
            server.stop()
        steps, spans, engine_ttfts = _trace_steps(load_trace(trace_path))
    return steps, _step_times(steps, spans), client, engine_ttfts


def _trace_steps(trace: Trace) -> tuple[list[StepWork], list[tuple[float, float]], list[float]]:
    """A run's steps, their spans (start, end in seconds) and its requests' TTFTs, rebuilt from its trace alone.
    A step's batch is the scheduler's state replayed up to its RUN_MODEL (``EngineState``: each sequence's
    tokens scheduled this step and those already in its cache); it is native when RUN_MODEL ran the compiled
    decode, and after an idle wait when the step before left no request waiting or running and one of the
    requests it admits arrived after that step's end (a server's engine core waited on its inbox for it;
    the first step always). Its span ends at its STEP_DONE and starts that step's ``latency_ms`` earlier. A
    request's TTFT runs from its arrival (its REQUEST_ENQUEUE less ``since_arrival_ms``) to the end of the
    step that computed its prompt's last chunk, where its first token comes, as the engine core times
    ``vllm:time_to_first_token_seconds``."""
    settings = read_settings(trace.header, trace.events)
    state = EngineState(settings.block_size, settings.enable_prefix_caching)
    steps, spans, ttfts, arrivals = [], [], [], {}
    idle_since, after_idle = float("-inf"), False  # idle_since: when the queues emptied (None: busy)
    for e in trace.events:
        if e.event in STATE_EVENTS:
            state.apply(e)
        stats = e.stats
        if e.event == "REQUEST_ENQUEUE":
            arrival = arrivals[stats.seq_id] = (e.t_ns - (stats.since_arrival_ms or 0) * 1e6) / 1e9
            after_idle = after_idle or (idle_since is not None and arrival > idle_since)
        elif e.event in ("RUN_MODEL", "CUDAGRAPH_REPLAY"):
            batch = [(state.scheduled[sid], state.computed[sid]) for sid in state.current.schedule.stats.seq_ids]
            steps.append(StepWork(batch, native=stats.mode == "compiled", after_idle=after_idle))
        elif ends_a_step(e):
            end = e.t_ns / 1e9
            spans.append((end - stats.latency_ms / 1e3, end))
            idle_since = None if stats.running_len or stats.waiting_len else end
            after_idle = False
            schedule = state.done.schedule.stats
            for sid, chunked in zip(schedule.seq_ids, getattr(schedule, "chunked", ())):
                if not chunked and sid in arrivals:  # a preempted sequence's second prefill is not its first token
                    ttfts.append(end - arrivals.pop(sid))
    assert len(steps) == len(spans), "a step without its RUN_MODEL or its STEP_DONE"
    return steps, spans, ttfts


def _client_p50_s(client: list[dict], name: str) -> float:
    """The median of the load generator's TTFT (``first_s``) or TPOT (``tpot_s``) over the requests that have
    one (a request whose tokens completed no character has no text chunk to time)."""
    values = []
    for r in client:
        tokens = r["usage"]["completion_tokens"]
        if r["first_s"] is None or (name == "tpot_s" and tokens < 2):
            continue
        values.append(r["first_s"] if name == "first_s" else (r["last_s"] - r["first_s"]) / (tokens - 1))
    return statistics.median(values)


def _step_times(steps: list[StepWork], spans: list[tuple[float, float]]) -> list[float]:
    """Each step's seconds from its start to the next step's start: what a running request waits between two
    tokens, the loop's work between the steps included (for a server's engine core, sending the step's
    tokens to the API process and taking the requests that came); to its own end when the engine then sat
    idle, or for the last step."""
    return [spans[k + 1][0] - start if k + 1 < len(spans) and not steps[k + 1].after_idle else end - start
            for k, (start, end) in enumerate(spans)]


def _by_kind(shape, device, efficiency, steps: list[StepWork], measured: list[float], label: str) -> None:
    """Measured and predicted medians of prefills after an idle wait, other prefills and decodes."""
    predicted = predict(shape, device, efficiency, steps)
    for name, chosen in (("prefills after an idle wait", lambda w: w.after_idle),
                         ("other prefills", lambda w: not w.native and not w.after_idle),
                         ("decodes", lambda w: w.native)):
        pairs = [(p, m) for p, m, w in zip(predicted, measured, steps) if chosen(w)]
        if pairs:
            print(f"  {label}, {name} ({len(pairs)}): measured p50 {statistics.median(m for _, m in pairs) * 1e3:.2f}"
                  f" ms, predicted p50 {statistics.median(p for p, _ in pairs) * 1e3:.2f} ms")


def _p50_ms(result: WorkloadResult, name: str) -> float:
    """The median of a per-request figure (``ttft_s`` or ``tpot_s``), in ms."""
    return statistics.median(v for t in result.requests.values() if (v := getattr(t, name)) is not None) * 1e3


def calibrate(args: argparse.Namespace) -> None:
    import torch

    torch.set_num_threads(args.threads)
    print("machine load before calibrating:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    shape = load_shape(default_model_path())
    device = get_device("this-cpu")
    print(f"this-cpu measured: {device.peak_flops / 1e9:.1f} GFLOP/s float32 matmul, "
          f"{device.memory_bandwidth / 1e9:.1f} GB/s copy ({device.source})")
    # A first run warms this process up (allocator, thread pool, lazily built kernels) and is not measured.
    _real_run(make_workload(16, AtOnce(), Uniform(16, 256), Uniform(16, 256), vocab_size=shape.vocab_size, seed=9))
    draws = {}
    for seed in (0, 1):
        workload = make_workload(args.calib_requests, AtOnce(), Uniform(16, 256), Uniform(16, 256),
                                 vocab_size=shape.vocab_size, seed=seed)
        wall = time.perf_counter()
        real, steps, measured, num_blocks = _real_run(workload, args.calib_repeats)
        print(f"draw {seed}: real engine {real.num_steps} steps, fastest of {args.calib_repeats} runs "
              f"{real.duration_s:.2f} s ({time.perf_counter() - wall:.1f} s with start-ups)")
        _, simulated = _simulated(workload, num_blocks)
        assert [w.batch for w in simulated] == [w.batch for w in steps]  # same decisions, same steps
        # Requests arriving in time, as a server sees them: lone prefills, some after an idle wait.
        arriving = make_workload(args.calib_poisson_requests, Poisson(args.calib_rate), Uniform(16, 128),
                                 Uniform(16, 64), vocab_size=shape.vocab_size, seed=seed)
        arrived, arrived_steps, arrived_measured, _ = _real_run(arriving)
        print(f"draw {seed} arriving (Poisson {args.calib_rate}/s): real engine {arrived.num_steps} steps, "
              f"{sum(w.after_idle for w in arrived_steps)} of them after an idle wait")
        draws[seed] = (workload, real, steps, measured, num_blocks, arriving, arrived, arrived_steps, arrived_measured)
    workload, real, steps, measured, num_blocks, arriving, arrived, arrived_steps, arrived_measured = draws[0]
    fit = fit_efficiency(shape, device, steps + arrived_steps, measured + arrived_measured)
    factors = {k: round(v, 9) for k, v in fit.efficiency.to_dict().items()}
    print(f"fitted on draw 0 ({len(steps) + len(arrived_steps)} steps): error {fit.median_abs_error:.1%} (the mean of "
          f"the median |error| of prefills, decodes of a few sequences and batched decodes); "
          f"factors {factors}")
    path = FACTORS_FILE if args.save else Path(args.factors_out)
    path.write_text(json.dumps(factors, indent=1) + "\n")
    workload, real, steps, measured, num_blocks, arriving, arrived, arrived_steps, arrived_measured = draws[1]
    errors = relative_errors(predict(shape, device, fit.efficiency, steps), measured)
    simulated, _ = _simulated(workload, num_blocks, str(path))
    total_error = simulated.duration_s / real.duration_s - 1
    print(f"judged on draw 1 ({len(steps)} steps): per-step median |error| {statistics.median(errors):.1%} "
          f"(p90 {sorted(errors)[int(0.9 * len(errors))]:.1%}); total wall time real {real.duration_s:.2f} s, "
          f"simulated {simulated.duration_s:.2f} s, error {total_error:+.1%}; factors in {path}")
    _by_kind(shape, device, fit.efficiency, arrived_steps, arrived_measured, "draw 1 arriving")
    simulated, _ = _simulated(arriving, num_blocks, str(path))
    print(f"  draw 1 arriving, per request: TTFT p50 measured {_p50_ms(arrived, 'ttft_s'):.2f} ms, simulated "
          f"{_p50_ms(simulated, 'ttft_s'):.2f} ms ({_p50_ms(simulated, 'ttft_s') / _p50_ms(arrived, 'ttft_s') - 1:+.0%});"
          f" TPOT p50 measured {_p50_ms(arrived, 'tpot_s'):.2f} ms, simulated {_p50_ms(simulated, 'tpot_s'):.2f} ms "
          f"({_p50_ms(simulated, 'tpot_s') / _p50_ms(arrived, 'tpot_s') - 1:+.0%})")
    # The same arriving draws through the server: its steps share the cores with the server's work for every
    # token it streams (the API process, the engine core's own messaging, its trace), so they are fitted apart,
    # into the served calibration.
    served = {seed: _served_run(draws[seed][5]) for seed in (0, 1)}
    steps, measured, client, engine_ttfts = served[0]
    fit = fit_efficiency(shape, device, steps, measured, shares=fit.efficiency)  # the same device: host terms alone
    # What a served request meets outside the engine (the client's send, HTTP, the hand-over to the engine
    # core, the first chunk's way back): the client's TTFT beyond the engine side's, medians of draw 0.
    frontend_s = max(0.0, _client_p50_s(client, "first_s") - statistics.median(engine_ttfts))
    efficiency = replace(fit.efficiency, frontend_s=frontend_s)
    factors = {k: round(v, 9) for k, v in efficiency.to_dict().items()}
    path = SERVED_FACTORS_FILE if args.save else Path(args.factors_out).with_suffix(".served.json")
    path.write_text(json.dumps(factors, indent=1) + "\n")
    print(f"served: fitted on draw 0 arriving through the server ({len(steps)} steps, "
          f"{sum(w.after_idle for w in steps)} after an idle wait): error "
          f"{fit.median_abs_error:.1%}; frontend_s {frontend_s * 1e3:.2f} ms (client TTFT p50 beyond the engine "
          f"side's); factors {factors}, in {path}")
    steps, measured, client, engine_ttfts = served[1]
    errors = relative_errors(predict(shape, device, efficiency, steps), measured)
    print(f"served: judged on draw 1 ({len(steps)} steps): per-step median |error| {statistics.median(errors):.1%}")
    _by_kind(shape, device, efficiency, steps, measured, "served draw 1")
    simulated, _ = _simulated(draws[1][5], num_blocks, str(path))
    ttft = _client_p50_s(client, "first_s") * 1e3
    tpot = _client_p50_s(client, "tpot_s") * 1e3
    print(f"  served draw 1, per request at the client: TTFT p50 measured {ttft:.2f} ms, simulated "
          f"{_p50_ms(simulated, 'ttft_s'):.2f} ms ({_p50_ms(simulated, 'ttft_s') / ttft - 1:+.0%}); TPOT p50 measured "
          f"{tpot:.2f} ms, simulated {_p50_ms(simulated, 'tpot_s'):.2f} ms ({_p50_ms(simulated, 'tpot_s') / tpot - 1:+.0%})")
    print("machine load after:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


def nano_vllm(seeds: list[int], num_requests: int) -> None:
    shape = load_shape("qwen3-0.6b")
    predicted = []
    for seed in seeds:
        llm = LLM("qwen3-0.6b", runner="simulated", hardware="rtx-4070-laptop", max_model_len=4096)
        workload = make_workload(num_requests, AtOnce(), Uniform(100, 1024), Uniform(100, 1024),
                                 vocab_size=shape.vocab_size, seed=seed)
        result = llm.run_workload(workload, ignore_eos=True)
        predicted.append(result.output_tokens_per_s)
        print(f"nano-vllm README benchmark on rtx-4070-laptop, draw {seed}: "
              f"{llm.model_runner.num_kvcache_blocks} KV blocks of 256 tokens")
        print("  simulated " + result.summary())
    if num_requests == 256:
        median = statistics.median(predicted)
        print(f"predicted {median:.0f} output tok/s (median of {len(seeds)} draws, {min(predicted):.0f}.."
              f"{max(predicted):.0f}), reported {NANO_VLLM_REPORTED_TOK_S:.0f}: "
              f"error {median / NANO_VLLM_REPORTED_TOK_S - 1:+.1%}")


def scale(args: argparse.Namespace) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    shape = load_shape(args.model)
    workload = make_workload(args.requests, Poisson(args.rate), sharegpt_prompt_lengths(), sharegpt_output_lengths(),
                             vocab_size=shape.vocab_size, seed=args.seed)
    built = time.perf_counter() - wall, time.process_time() - cpu
    wall, cpu = time.perf_counter(), time.process_time()
    recorder = TraceRecorder(args.trace)
    llm = LLM(args.model, runner="simulated", hardware=args.hardware, max_model_len=args.max_model_len,
              trace=recorder)
    result = llm.run_workload(workload)
    llm.close()
    ran = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{args.requests} requests of {shape.name} on {args.hardware}, Poisson {args.rate}/s, "
          f"{llm.model_runner.num_kvcache_blocks} KV blocks of 256 tokens")
    print(f"  workload built in {built[0]:.1f} s wall ({built[1]:.1f} s CPU); simulated with the real LLMEngine "
          f"in {ran[0]:.1f} s wall ({ran[1]:.1f} s CPU), {len(recorder.events)} events recorded"
          + (f" and written to {args.trace}" if args.trace else " in memory"))
    print("  simulated " + result.summary())


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=("all", "calibrate", "nano-vllm", "scale"), default="all")
    parser.add_argument("--calib-requests", type=int, default=64)
    parser.add_argument("--calib-repeats", type=int, default=3, help="real runs of each draw (fastest step kept)")
    parser.add_argument("--calib-poisson-requests", type=int, default=60,
                        help="requests of each draw's arriving part (Poisson at --calib-rate)")
    parser.add_argument("--calib-rate", type=float, default=12.0, help="requests/s of the arriving part")
    parser.add_argument("--threads", type=int, default=1, help="torch threads for the real engine (calibration)")
    parser.add_argument("--save", action="store_true", help="write the fitted factors to nanovllm_teach/sim/")
    parser.add_argument("--factors-out", default=str(Path(tempfile.gettempdir()) / "this_cpu_factors.json"),
                        help="where the fitted factors go without --save")
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
    if args.part in ("all", "calibrate"):
        calibrate(args)
    if args.part in ("all", "nano-vllm"):
        nano_vllm(list(range(args.nano_seeds)), args.nano_requests)
    if args.part in ("all", "scale"):
        scale(args)


if __name__ == "__main__":
    main()
