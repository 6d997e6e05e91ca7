"""bench_cpu.py's workload options and its roofline line, on a workload small enough for the suite (nothing
is timed here: the numbers belong in benchmarks/RESULTS.md)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_bench_cpu_defaults_equal_outputs_and_roofline():
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_cpu.py"), "--num-requests", "3", "--defaults",
         "--equal-outputs", "6", "--max-len", "20", "--hf-batch-sizes", "3", "--skip-hf-cb", "--threads", "1"],
        capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "output tokens 18 (all 6, ignore_eos)" in out
    assert "[default settings;" in out
    assert re.search(r"limits   float32 matmul [\d.]+ GFLOP/s .* memory bandwidth [\d.]+ GB/s", out)
    assert re.search(r"roofline of our 5 decode forwards .* GFLOP/s = \d+% of the matmul peak; "
                     r"[\d.]+ GB/s = \d+% of the memory bandwidth", out)
    assert "ours vs HF generate, batch 3: 3/3 requests token-identical" in out
