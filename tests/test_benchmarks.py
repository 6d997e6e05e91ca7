"""The benchmark scripts still run, on workloads small enough for the suite.

Nothing here times anything: the numbers belong in ``benchmarks/RESULTS.md``. What is checked is what the
scripts check themselves: the synthetic long trace is consistent, and our engine's greedy tokens equal both
Hugging Face baselines' on the benchmark workload.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(script: str, *args: str) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_bench_viz_small():
    out = _run("bench_viz.py", "--events", "3000", "--player-steps", "40", "--samples", "2", "--load-repeats", "1")
    assert "load + tables: median" in out
    assert "Player() on the long trace" in out
    assert "set_step, random jumps" in out


def test_bench_cpu_small():
    out = _run("bench_cpu.py", "--num-requests", "4", "--hf-batch-sizes", "4", "--threads", "1",
               "--trace-overhead", "--trace-repeats", "1")
    assert "ours vs HF generate, batch 4: 4/4 requests token-identical" in out
    assert "ours vs HF continuous batching: 4/4 requests token-identical" in out
    assert "on / off by wall time" in out


def test_bench_faults_small():
    out = _run("bench_faults.py", "--faults", "20")
    assert "after 20/20 faults" in out


def test_bench_decode_attention_small():
    out = _run("bench_decode_attention.py", "--batch", "6", "--calls", "2", "--repeats", "1", "--spare-blocks", "3")
    assert "kernel / torch" in out and out.count("cpp kernel") == 2


def test_bench_sampling_small():
    out = _run("bench_sampling.py", "--rows", "2", "--vocab", "4096", "--rounds", "1")
    assert "the most likely candidates first and whole rows keep the same tokens" in out
    assert "top_k=20 top_p=0.95 min_p=0.05" in out and "logprobs=5" in out


def test_every_benchmark_parser_refuses_an_abbreviated_option():
    """``--num-req`` is not taken for ``--num-requests``: each script's parser says ``allow_abbrev=False``,
    as the package's CLI does (a typo is told, never guessed)."""
    import ast

    parsers = []
    for script in sorted((ROOT / "benchmarks").rglob("*.py")):
        for node in ast.walk(ast.parse(script.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "ArgumentParser":
                allow_abbrev = {k.arg: k.value for k in node.keywords}.get("allow_abbrev")
                parsers.append((script.name, isinstance(allow_abbrev, ast.Constant) and allow_abbrev.value is False))
    assert parsers and [name for name, refuses in parsers if not refuses] == []
