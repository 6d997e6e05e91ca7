"""The simulator benchmark still runs, on a workload small enough for the suite (numbers go to RESULTS.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_bench_sim_small(tmp_path):
    trace = tmp_path / "sim.jsonl"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_sim.py"), "--nano-requests", "16",
                           "--nano-seeds", "1", "--requests", "40", "--rate", "2", "--trace", str(trace),
                           "--calib-requests", "8", "--calib-repeats", "1", "--calib-poisson-requests", "8",
                           "--calib-rate", "20",
                           "--factors-out", str(tmp_path / "factors.json")],
                          capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, cwd=ROOT,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "judged on draw 1" in done.stdout and "total wall time real" in done.stdout
    assert set(json.loads((tmp_path / "factors.json").read_text())) >= {"matmul", "memory", "step_overhead_s",
                                                                         "kernel_launch_s", "wake_s"}
    assert "draw 1 arriving, per request: TTFT p50 measured" in done.stdout
    assert "served: judged on draw 1" in done.stdout and (tmp_path / "factors.served.json").is_file()
    assert "nano-vllm README benchmark on rtx-4070-laptop, draw 0" in done.stdout
    assert "40 requests of qwen3-8b on h100-sxm" in done.stdout and "TTFT p50" in done.stdout
    from nanovllm_teach.trace.reader import load_trace
    loaded = load_trace(trace)
    assert len(loaded.requests) == 40 and loaded.steps[-1].used_blocks == 0


def test_trace_steps_rebuild_what_the_runner_ran(tmp_path):
    """The served calibration reads each step from the engine's trace alone: the rebuilt batches (new and
    cached tokens per sequence) and the native decodes are those the engine ran, with one TTFT per request,
    through prompt chunks and preemptions."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_sim import CALIB_SETTINGS, _trace_steps

    from nanovllm_teach import LLM
    from nanovllm_teach.assets import default_model_path
    from nanovllm_teach.trace.reader import load_trace
    from nanovllm_teach.trace.recorder import TraceRecorder
    from nanovllm_teach.workload.requests import AtOnce, Uniform, make_workload

    path = tmp_path / "run.jsonl"
    settings = {**CALIB_SETTINGS, "max_num_batched_tokens": 128, "kvcache_block_size": 16, "num_kvcache_blocks": 24}
    llm = LLM(default_model_path(), trace=TraceRecorder(path), **settings)
    ran, run = [], llm.model_runner.run

    def recording_run(batch):
        ran.append(([(len(seq.token_ids), seq.num_cached_tokens) for seq in batch.seqs],
                    not batch.is_prefill and llm.model_runner.decode_paths.native is not None))
        return run(batch)

    llm.model_runner.run = recording_run
    result = llm.run_workload(make_workload(12, AtOnce(), Uniform(16, 200), Uniform(4, 40), vocab_size=600, seed=3))
    llm.close()
    trace = load_trace(path)
    assert any(e.event == "PREEMPT" for e in trace.events)
    assert any(any(e.stats.chunked) for e in trace.events if e.event == "SCHEDULE_PREFILL")
    steps, spans, ttfts = _trace_steps(trace)
    assert [(w.batch, w.native) for w in steps] == ran
    assert [w.after_idle for w in steps] == [True] + [False] * (len(steps) - 1)  # all at once: never idle again
    assert all(start < end <= next_start for (start, end), (next_start, _) in zip(spans, spans[1:]))
    assert len(ttfts) == len(result.requests)  # one each: a preempted sequence's second prefill is no first token
    assert all(t > 0 for t in ttfts)
