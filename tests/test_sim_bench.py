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
