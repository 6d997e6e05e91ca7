"""bench_peers.py's pure parts (the floor, token identity, the table) and one small run with our engine
beside a peer that is not installed. Nothing is installed or built here and nothing is timed: the numbers
belong in benchmarks/RESULTS.md."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_peers  # noqa: E402
from bench_peers import Row, floor_ms, paired_ratios, identical, per_token_ms, table  # noqa: E402


def test_floor_is_the_larger_of_reading_and_multiplying():
    # 8 MB at 20 GB/s = 0.4 ms; 1 GFLOP at 100 GFLOP/s = 10 ms: compute-bound.
    f = floor_ms(8e6, 20.0, 1e9, 100.0)
    assert f["memory_ms"] == pytest.approx(0.4)
    assert f["compute_ms"] == pytest.approx(10.0)
    assert f["floor_ms"] == pytest.approx(10.0)
    assert floor_ms(8e6, 20.0, 1e6, 100.0)["floor_ms"] == pytest.approx(0.4)  # memory-bound
    with pytest.raises(ValueError, match="read 0"):
        floor_ms(8e6, 0, 1e9, 100.0)


def test_each_repeat_is_judged_against_its_own_floor():
    ratios, median = paired_ratios([6.0, 4.5, 5.0], [2.0, 1.5, 2.5])
    assert ratios == pytest.approx([3.0, 3.0, 2.0])
    assert median == pytest.approx(3.0)
    with pytest.raises(ValueError, match="one reference per repeat"):
        paired_ratios([6.0, 4.5], [2.0])


def test_identity_counts_whole_requests_and_needs_equal_counts():
    assert identical([[1, 2], [3, 4], [5]], [[1, 2], [3, 5], [5]]) == 2
    assert identical([[1, 2]], [[1, 2, 3]]) == 0  # a longer answer is not the same answer
    with pytest.raises(ValueError):
        identical([[1]], [[1], [2]])


def test_per_token_cost_cancels_the_fixed_part():
    assert per_token_ms(1.3, 0.1, 120) == pytest.approx(10.0)


def test_table_shows_ratios_identity_and_why_a_peer_is_missing():
    rows = [Row("ours", version="0.1.0", build_s=2.0, start_s=2.5, tok_s=[100.0, 300.0, 200.0],
                single_ms=[1.0, 2.0, 3.0], batch_ms=[5.0, 6.0, 7.0]),
            Row("vllm", version="0.32.0", build_s=40.0, start_s=50.0, tok_s=[100.0, 100.0, 100.0], same=[48, 48, 47],
                single_ms=[3.0] * 3, batch_ms=[8.0] * 3),
            Row("llama", why="not installed in /p/llama (--skip-install)")]
    lines = table(rows, 48).splitlines()
    assert lines[2] == "| nanovllm_teach 0.1.0 | 200 | 1.00 | — | 2.000 | 6.00 | 2.0 | 2.5 |"
    assert lines[3] == "| vLLM CPU build 0.32.0 | 100 | 0.50 | 48/48, 48/48, 47/48 | 3.000 | 8.00 | 40.0 | 50.0 |"
    assert lines[4].startswith("| llama.cpp (llama-cpp-python) | did not run: not installed in /p/llama")
    assert all(line.count("|") == lines[0].count("|") for line in lines)


def test_a_small_run_beside_a_missing_peer(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_peers.py"), "--engines", "ours", "llama",
         "--skip-install", "--peers-dir", str(tmp_path), "--threads", "1", "--num-requests", "3",
         "--max-len", "24", "--decode-tokens", "2", "--repeats", "2"],
        capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert f"| llama.cpp (llama-cpp-python) | did not run: not installed in {tmp_path / 'llama' / 'venv'}" in out
    assert "| nanovllm_teach " in out
    assert "floor of one decode step at our 1 thread(s)" in out
    assert out.count("  floor  one request ") == 2  # measured after each of the two repeats
    assert out.count("ours over that repeat's floor: ") == 2  # one request, batch 32
    assert bench_peers.WORKER.is_file()
