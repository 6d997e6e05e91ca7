"""The real Scheduler and BlockManager on a simulated runner: a Poisson workload runs to the end, nothing leaks,
shared prefixes hit the cache, a small cache preempts, and the trace reads like any other."""

from __future__ import annotations

import pytest

from nanovllm_teach.sim.cost_model import load_shape
from nanovllm_teach.sim.driver import simulate
from nanovllm_teach.sim.hardware import DEVICES
from nanovllm_teach.sim.runner import SimulatedRunner
from nanovllm_teach.sim.workload import AtOnce, Fixed, Poisson, Replay, Request, SharedPrefix, Uniform, make_workload
from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.trace.recorder import TraceRecorder
from nanovllm_teach.trace.tables import check_consistency

SHAPE = load_shape("qwen3-0.6b")


def _run(workload, *, enable_prefix_caching=True, ignore_eos=False, hardware="h100-sxm", **settings):
    rec = TraceRecorder()
    rec.open({"schema": "nanovllm_teach.trace", "version": 1})
    runner = SimulatedRunner(SHAPE, DEVICES[hardware], recorder=rec, **settings)
    result = simulate(runner, workload, enable_prefix_caching=enable_prefix_caching, ignore_eos=ignore_eos,
                      recorder=rec)
    return result, runner, Trace.from_recorder(rec)


def _poisson(n=120, rate=20.0, **kwargs):
    return make_workload(n, Poisson(rate), Uniform(20, 600), Uniform(1, 200), vocab_size=SHAPE.vocab_size,
                         seed=3, **kwargs)


def test_every_request_finishes_at_its_length_and_no_block_leaks():
    workload = _poisson()
    result, runner, trace = _run(workload)
    assert len(result.requests) == len(workload)
    for seq_id, request in enumerate(workload):
        times = result.requests[seq_id]
        assert times.finish_reason == "eos" and times.num_output_tokens == request.output_len
        assert times.arrival_s <= times.first_token_s <= times.finish_s
    last = trace.steps[-1]
    assert last.used_blocks == 0 and last.free_blocks == runner.num_kvcache_blocks
    assert check_consistency(trace) == []
    assert result.duration_s >= workload[-1].arrival_s - workload[0].arrival_s
    assert sum(result.steps_by_bound.values()) == result.num_steps == len(trace.steps)


def test_step_done_carries_the_prediction_and_the_bound():
    _, _, trace = _run(_poisson(30))
    done = trace.events_named("STEP_DONE")
    assert {e.stats["bound"] for e in done} <= {"compute", "memory", "launch"}
    assert all(e.stats["latency_ms"] == e.stats["predicted_ms"] > 0 for e in done)


def test_ignore_eos_runs_every_request_to_max_tokens():
    workload = _poisson(20)
    result, _, _ = _run(workload, ignore_eos=True)
    assert {t.finish_reason for t in result.requests.values()} == {"length"}
    assert result.output_tokens == sum(r.output_len for r in workload)


def test_shared_prefixes_hit_the_cache_and_save_time():
    workload = _poisson(80, shared_prefix=SharedPrefix(num_groups=2, prefix_len=1024))
    runs = {cache: _run(workload, enable_prefix_caching=cache, hardware="l4") for cache in (True, False)}
    hits = runs[True][2].events_named("PREFIX_CACHE_HIT")
    assert len(hits) >= 60
    assert all(e.stats["num_cached_tokens"] % 256 == 0 and e.stats["num_cached_tokens"] >= 1024 for e in hits)
    assert not runs[False][2].events_named("PREFIX_CACHE_HIT")
    prefill_ms = {cache: sum(row.latency_ms for row in trace.steps if row.phase == "prefill")
                  for cache, (_, _, trace) in runs.items()}
    # On an L4 the 0.6B model's prefills are compute-bound: 1024 fewer tokens to compute is time saved.
    assert prefill_ms[True] < 0.6 * prefill_ms[False]
    assert runs[True][0].output_tokens == runs[False][0].output_tokens


def test_a_small_cache_preempts_and_still_finishes_everything():
    workload = make_workload(40, AtOnce(), Uniform(200, 400), Uniform(100, 300), vocab_size=SHAPE.vocab_size, seed=1)
    result, runner, trace = _run(workload, num_kvcache_blocks=12)
    assert result.num_preemptions > 0 and trace.events_named("PREEMPT")
    assert all(t.finish_reason == "eos" for t in result.requests.values())
    assert trace.steps[-1].used_blocks == 0
    assert check_consistency(trace) == []


def test_an_idle_engine_waits_for_the_next_arrival():
    workload = make_workload(2, Replay([0.0, 100.0]), Fixed(10), Fixed(5), vocab_size=SHAPE.vocab_size)
    result, _, _ = _run(workload)
    second = result.requests[1]
    assert second.arrival_s == 100.0 and second.first_token_s > 100.0
    assert result.requests[0].finish_s < 1.0 and 100.0 < result.duration_s < 101.0


def test_max_tokens_below_the_answer_cuts_it_and_a_request_too_big_is_refused():
    short = [Request(0.0, [5] * 20, output_len=50, max_tokens=10)]
    result, _, _ = _run(short)
    assert result.requests[0].finish_reason == "length" and result.requests[0].num_output_tokens == 10
    with pytest.raises(ValueError, match="could never fit"):
        _run([Request(0.0, [5] * 20, output_len=500)], num_kvcache_blocks=2)
    with pytest.raises(ValueError, match="max_model_len"):
        _run([Request(0.0, [5] * 5000, output_len=5)])


def test_static_batching_is_slower_than_continuous_at_scale():
    workload = make_workload(100, AtOnce(), Uniform(50, 300), Uniform(10, 400), vocab_size=SHAPE.vocab_size, seed=2)
    times = {}
    for policy in ("continuous", "static"):
        rec = TraceRecorder(keep_in_memory=False)
        rec.open({})
        runner = SimulatedRunner(SHAPE, DEVICES["l4"], max_num_seqs=32, recorder=rec)
        times[policy] = simulate(runner, workload, scheduling_policy=policy, recorder=rec).duration_s
    assert times["static"] > 1.2 * times["continuous"]
