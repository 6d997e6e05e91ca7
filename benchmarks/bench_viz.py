"""Replay and widget benchmark: loading a very long trace, and one step of the player.

1. **Loading**: a 1,000,000-event trace is synthesised from a recorded one and timed through
   ``load_trace`` and the derived tables (``trace.steps``, ``trace.requests``), ``--load-repeats`` times
   (each in a fresh process, the median and the slowest are reported). Target: under 10 s. Building a
   ``Player`` on that trace is timed too (no target: the viewer's data of every step, encoded once).
2. **Player step**: ``Player.set_step`` on a trace of about 1000 steps: the Python side's part of a step
   (the ``step`` trait set and synced; the browser draws the step itself, its speed is measured by
   ``tests/test_browser.py`` in JupyterLab). Target: under 100 ms.

The synthetic traces are the engine's own events: every ``generate()`` call of the source trace (from its
GENERATE_START to its GENERATE_FINISH) is repeated, one copy after the other, with event indices, times,
step numbers and sequence ids shifted so that the result is one long, consistent run (each call frees every
block it took, so the copies reuse the same blocks the way the engine would). ``check_consistency`` is run
on the player's trace to prove it.

The source trace: ``--source PATH`` if given; else ``traces/cpu_benchmark.jsonl`` if the shipped traces
exist; else one is recorded here (needs torch) on a random tiny checkpoint with the CPU benchmark's
workload shape (64 requests, prompts of 16–256 token ids, 16–256 output tokens each, continuous
batching): batches of up to 64 sequences, so the event lines are as long as a real run's.

Usage::

    python benchmarks/bench_viz.py [--source TRACE.jsonl] [--events 1000000] [--load-repeats 3]
                                   [--player-steps 1000]

Results are in ``benchmarks/RESULTS.md`` ("Replay and widgets (bench_viz.py)").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

ROOT = Path(__file__).resolve().parent.parent
SHIPPED_SOURCE = ROOT / "traces" / "cpu_benchmark.jsonl"
# Stats fields that hold sequence ids, and must be shifted in each copy.
SEQ_ID_FIELDS = ("seq_id", "needed_by")
SEQ_ID_LIST_FIELDS = ("seq_ids", "finished")


def record_source(path: Path) -> Path:
    """Record the CPU benchmark's workload shape on a random tiny checkpoint (needs torch)."""
    import torch

    sys.path.insert(0, str(ROOT / "tests"))
    from checkpoints import make_random_checkpoint

    from nanovllm_teach import LLM
    from nanovllm_teach.scenarios import bench_workload
    from nanovllm_teach.trace import TraceRecorder

    torch.set_num_threads(1)
    checkpoint = make_random_checkpoint(path.parent / "random_checkpoint")
    workload = bench_workload(64, range(384), seed=0)
    prompts = [[max(3, t) for t in p] for p in workload.prompts]  # ids 0-2 are the special tokens
    llm = LLM(checkpoint, trace=TraceRecorder(path, keep_in_memory=False), kvcache_block_size=16,
              max_model_len=512, max_num_batched_tokens=1024, num_kvcache_blocks=2048)
    try:
        llm.generate(prompts, workload.params, use_tqdm=False)
    finally:
        llm.close()
    return path


def _windows(events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]]]:
    """The events before the first generate() call, and each call's events (GENERATE_START..FINISH)."""
    prologue: list[dict[str, Any]] = []
    windows: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] | None = None
    for e in events:
        if e["event"] == "GENERATE_START":
            current = []
        if current is None:
            if not windows:
                prologue.append(e)
            continue
        current.append(e)
        if e["event"] == "GENERATE_FINISH":
            windows.append(current)
            current = None
    if not windows:
        raise ValueError("the source trace has no complete generate() call to repeat")
    return prologue, windows


def _shifted(e: dict[str, Any], i: int, dt: int, dstep: int, dseq: int) -> dict[str, Any]:
    stats = dict(e["stats"])
    for key in SEQ_ID_FIELDS:
        if isinstance(stats.get(key), int):
            stats[key] += dseq
    for key in SEQ_ID_LIST_FIELDS:
        if isinstance(stats.get(key), list):
            stats[key] = [sid + dseq for sid in stats[key]]
    step = e["step"] + dstep if e["step"] is not None else None
    return {**e, "i": i, "t_ns": e["t_ns"] + dt, "step": step, "stats": stats}


def synthesize(source: Path, out: Path, *, min_events: int | None = None,
               min_steps: int | None = None) -> dict[str, int]:
    """Write a trace made of the source's generate() calls repeated until it has ``min_events`` events
    or ``min_steps`` steps; returns its size."""
    lines = source.read_text(encoding="utf-8").splitlines()
    header, events = lines[0], [json.loads(line) for line in lines[1:]]
    prologue, windows = _windows(events)

    def copies() -> Iterator[list[dict[str, Any]]]:
        while True:
            yield from windows

    n_events = n_steps = n_requests = 0
    # Where the next copy starts (None: the first copy keeps the source's own times, steps and ids).
    next_t: int | None = None
    next_step: int | None = None
    next_seq: int | None = None
    with out.open("w", encoding="utf-8") as f:
        f.write(header + "\n")
        for e in prologue:
            f.write(json.dumps({**e, "i": n_events}, ensure_ascii=False, separators=(",", ":")) + "\n")
            n_events += 1
        for window in copies():
            if (min_events is not None and n_events >= min_events) or (min_steps is not None and n_steps >= min_steps):
                break
            steps = sorted({e["step"] for e in window if e["step"] is not None})
            seqs = [e["stats"]["seq_id"] for e in window if e["event"] == "REQUEST_ENQUEUE"]
            dt = 0 if next_t is None else next_t - window[0]["t_ns"]
            dstep = 0 if next_step is None or not steps else next_step - steps[0]
            dseq = 0 if next_seq is None or not seqs else next_seq - min(seqs)
            for e in window:
                f.write(json.dumps(_shifted(e, n_events, dt, dstep, dseq), ensure_ascii=False,
                                   separators=(",", ":")) + "\n")
                n_events += 1
            next_t = window[-1]["t_ns"] + dt + 1000
            if steps:
                next_step = steps[-1] + dstep + 1
            if seqs:
                next_seq = max(seqs) + dseq + 1
            n_steps += len(steps)
            n_requests += len(seqs)
    return {"events": n_events, "steps": n_steps, "requests": n_requests}


def time_load(path: Path) -> dict[str, float]:
    """Wall and CPU seconds of load_trace, trace.steps and trace.requests. CPU time is what the work
    costs; wall time also counts the waits for a core on a shared machine."""
    from nanovllm_teach.trace import load_trace

    clocks = [(time.perf_counter(), time.process_time())]
    trace = load_trace(path)
    clocks.append((time.perf_counter(), time.process_time()))
    steps = trace.steps
    clocks.append((time.perf_counter(), time.process_time()))
    requests = trace.requests
    clocks.append((time.perf_counter(), time.process_time()))
    out: dict[str, float] = {"events": len(trace.events), "steps": len(steps), "requests": len(requests),
                             "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6}
    for name, (w0, c0), (w1, c1) in zip(("load", "steps", "requests"), clocks, clocks[1:]):
        out[f"{name}_s"], out[f"{name}_cpu_s"] = w1 - w0, c1 - c0
    out["total_s"], out["total_cpu_s"] = clocks[-1][0] - clocks[0][0], clocks[-1][1] - clocks[0][1]
    return out


def time_load_in_subprocess(path: Path) -> dict[str, float]:
    """``time_load`` in a fresh interpreter, so that each repeat starts from the same empty heap."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import bench_viz; "
            "print(json.dumps(bench_viz.time_load(bench_viz.Path(sys.argv[2]))))")
    done = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent), str(path)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def time_long_player(path: Path) -> float:
    """Seconds to build a Player on ``path`` (after loading it and its tables, which are not counted)."""
    from nanovllm_teach.trace import load_trace
    from nanovllm_teach.viz import Player

    trace = load_trace(path)
    assert trace.steps and trace.requests  # built (and checked) before the clock starts
    t0 = time.perf_counter()
    Player(trace)
    return time.perf_counter() - t0


def time_player(path: Path, samples: int, seed: int) -> dict[str, float]:
    from nanovllm_teach.trace import check_consistency, load_trace
    from nanovllm_teach.viz import Player

    trace = load_trace(path)
    problems = check_consistency(trace)
    if problems:
        raise SystemExit(f"the synthetic trace is inconsistent: {problems[:3]}")
    t0 = time.perf_counter()
    player = Player(trace)
    build_s = time.perf_counter() - t0
    rng = random.Random(seed)
    jumps = [rng.choice(player.steps) for _ in range(samples)]
    start = player.steps[len(player.steps) // 2]
    walk = [s for s in player.steps if start <= s < start + samples]  # what Play does: one step after another

    def timed(steps: list[int]) -> tuple[list[float], list[float]]:
        """Wall and CPU milliseconds of each set_step."""
        wall, cpu = [], []
        for s in steps:
            w, c = time.perf_counter(), time.process_time()
            player.set_step(s)
            wall.append((time.perf_counter() - w) * 1000)
            cpu.append((time.process_time() - c) * 1000)
        return wall, cpu

    (jump_ms, jump_cpu), (walk_ms, walk_cpu) = timed(jumps), timed(walk)
    return {"steps": len(player.steps), "requests": len(trace.requests), "blocks": player.replay.num_blocks,
            "build_s": build_s, "jump_median_ms": statistics.median(jump_ms), "jump_max_ms": max(jump_ms),
            "jump_cpu_ms": statistics.median(jump_cpu), "walk_median_ms": statistics.median(walk_ms),
            "walk_max_ms": max(walk_ms), "walk_cpu_ms": statistics.median(walk_cpu)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=None, help="a recorded trace to repeat")
    parser.add_argument("--events", type=int, default=1_000_000, help="events in the long trace")
    parser.add_argument("--load-repeats", type=int, default=3, help="timed loads of the long trace")
    parser.add_argument("--skip-long-player", action="store_true", help="do not build a Player on the long trace")
    parser.add_argument("--player-steps", type=int, default=1000, help="steps in the player's trace")
    parser.add_argument("--samples", type=int, default=40, help="set_step calls timed (each kind)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work-dir", type=Path, default=None, help="where the traces are written "
                                                                   "(default: a temporary folder)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        work = args.work_dir or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        source = args.source or (SHIPPED_SOURCE if SHIPPED_SOURCE.exists() else None)
        if source is None:
            t = time.perf_counter()
            source = record_source(work / "source.jsonl")
            print(f"recorded the source trace in {time.perf_counter() - t:.1f} s: {source}")
        print(f"source: {source}")
        print(f"machine: {platform.processor() or platform.machine()}, python {platform.python_version()}")

        long_path = work / "long.jsonl"
        t = time.perf_counter()
        size = synthesize(source, long_path, min_events=args.events)
        print(f"synthesised {size['events']:,} events ({size['steps']:,} steps, {size['requests']:,} requests, "
              f"{long_path.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t:.1f} s")
        loads = [time_load_in_subprocess(long_path) for _ in range(args.load_repeats)]
        for n, load in enumerate(loads, 1):
            print(f"load {n}/{len(loads)}: load_trace {load['load_s']:.2f} s (cpu {load['load_cpu_s']:.2f}), "
                  f"trace.steps {load['steps_s']:.2f} s (cpu {load['steps_cpu_s']:.2f}), trace.requests "
                  f"{load['requests_s']:.2f} s (cpu {load['requests_cpu_s']:.2f}) -> total {load['total_s']:.2f} s "
                  f"wall, {load['total_cpu_s']:.2f} s cpu; peak memory {load['peak_rss_gb']:.1f} GB")
        totals = [load["total_s"] for load in loads]
        print(f"load + tables: median {statistics.median(totals):.2f} s, slowest {max(totals):.2f} s wall "
              f"over {len(loads)} fresh processes (target < 10 s)")
        if not args.skip_long_player:
            print(f"Player() on the long trace: {time_long_player(long_path):.1f} s")
        long_path.unlink()

        player_path = work / "player.jsonl"
        size = synthesize(source, player_path, min_steps=args.player_steps)
        player = time_player(player_path, args.samples, args.seed)
        print(f"player trace: {player['steps']} steps, {player['requests']} requests, {player['blocks']} KV blocks; "
              f"Player() built in {player['build_s']:.2f} s")
        print(f"set_step, random jumps: median {player['jump_median_ms']:.1f} ms (cpu {player['jump_cpu_ms']:.1f}), "
              f"max {player['jump_max_ms']:.1f} ms; one step after another: median {player['walk_median_ms']:.1f} ms "
              f"(cpu {player['walk_cpu_ms']:.1f}), max {player['walk_max_ms']:.1f} ms (target < 100 ms)")
        print(f"load average during the run: {', '.join(f'{x:.1f}' for x in os.getloadavg())} "
              f"on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
