"""The simulator benchmark still runs, on a workload small enough for the suite (numbers go to RESULTS.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

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


def _rebuilt_against_runner(tmp_path, hardware: str, workload: list, **settings):
    """A simulated run of ``workload`` with its trace: the runner's own ``StepWork`` per step, the engine's
    result, the trace, and what ``_trace_steps`` rebuilt from the trace."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_sim import CALIB_SETTINGS, _trace_steps

    from nanovllm_teach import LLM
    from nanovllm_teach.assets import default_model_path
    from nanovllm_teach.trace.reader import load_trace
    from nanovllm_teach.trace.recorder import TraceRecorder

    path = tmp_path / "run.jsonl"
    llm = LLM(default_model_path(), runner="simulated", hardware=hardware, trace=TraceRecorder(path),
              **{**CALIB_SETTINGS, **settings})
    works, run = [], llm.model_runner.run

    def recording_run(batch):
        tokens = run(batch)
        works.append(llm.model_runner.last_work)
        return tokens

    llm.model_runner.run = recording_run
    result = llm.run_workload(workload)
    llm.close()
    trace = load_trace(path)
    steps, spans, ttfts = _trace_steps(trace)
    # The simulated clock stamps the events, so the times are exact (to the microsecond STEP_DONE's
    # latency_ms is rounded to): each step ends before the next starts, and the TTFTs are the engine's.
    assert all(start < end <= next_start + 1e-6 for (start, end), (next_start, _) in zip(spans, spans[1:]))
    assert sorted(ttfts) == pytest.approx(sorted(t.ttft_s for t in result.requests.values()), abs=1e-6)
    return works, trace, steps


def test_trace_steps_rebuild_chunks_preemptions_and_native_decodes(tmp_path):
    """The served calibration reads each step from the engine's trace alone: each sequence's new and cached
    tokens and the native decodes are the runner's own, through prompt chunks and preemptions."""
    from nanovllm_teach.workload.requests import AtOnce, Uniform, make_workload

    workload = make_workload(12, AtOnce(), Uniform(16, 200), Uniform(4, 40), vocab_size=600, seed=3)
    works, trace, steps = _rebuilt_against_runner(tmp_path, "this-cpu", workload, max_num_batched_tokens=128,
                                                  kvcache_block_size=16, num_kvcache_blocks=24)
    assert any(e.event == "PREEMPT" for e in trace.events)
    assert any(any(e.stats.chunked) for e in trace.events if e.event == "SCHEDULE_PREFILL")
    assert any(w.native for w in works)
    # The first step counts as after an idle wait, as a server's engine core starts out waiting; every
    # request here was in before the simulated engine's first step.
    assert steps[0] == replace(works[0], after_idle=True) and steps[1:] == works[1:]


def test_trace_steps_tell_an_idle_wait_from_an_arrival_during_a_step(tmp_path):
    """A step after an idle wait is one whose request arrived after the queues emptied; a request that came
    during the step that emptied them is taken at once (no wait). The engine has no API server's work in its
    loop here (a GPU's fitted one would make the emptied engine wait for it after that step)."""
    import json

    from nanovllm_teach.sim.efficiency import Efficiency
    from nanovllm_teach.workload.requests import Poisson, Uniform, make_workload

    factors = tmp_path / "l4.json"
    factors.write_text(json.dumps(Efficiency.for_device("l4").to_dict() | {"frontend_request_s": 0.0,
                                                                          "frontend_token_s": 0.0}))
    workload = make_workload(40, Poisson(100), Uniform(16, 64), Uniform(4, 24), vocab_size=600, seed=0)
    works, trace, steps = _rebuilt_against_runner(tmp_path, "l4", workload, sim_factors=str(factors))
    ends = [e.stats for e in trace.events if e.event == "STEP_DONE"][:-1]
    idle_waits = sum(w.after_idle for w in works[1:])
    assert idle_waits > 1 and sum(not (s.running_len or s.waiting_len) for s in ends) > idle_waits
    assert steps == works
