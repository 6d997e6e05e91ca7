"""The real LLMEngine, Scheduler and BlockManager on a simulated runner (``runner="simulated"``): a Poisson
workload runs to the end on the simulated clock, nothing leaks, shared prefixes hit the cache, a small
cache preempts, and the trace reads like any other."""

from __future__ import annotations

import json

import pytest

from nanovllm_teach import LLM, SamplingParams
from nanovllm_teach.sim.cost_model import load_shape
from nanovllm_teach.workload.requests import AtOnce, Fixed, Poisson, Replay, Request, SharedPrefix, Uniform, make_workload
from nanovllm_teach.trace.reader import Trace, load_trace
from nanovllm_teach.trace.recorder import TraceRecorder
from nanovllm_teach.trace.consistency import check_consistency

SHAPE = load_shape("qwen3-0.6b")


def _engine(hardware="h100-sxm", trace=None, **settings):
    return LLM("qwen3-0.6b", runner="simulated", hardware=hardware, trace=trace, **settings)


def _run(workload, *, ignore_eos=False, hardware="h100-sxm", **settings):
    rec = TraceRecorder(validate=True)
    llm = _engine(hardware, rec, **settings)
    result = llm.run_workload(workload, ignore_eos=ignore_eos)
    return result, llm.model_runner, Trace.from_recorder(rec)


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
    assert all(e.stats["latency_ms"] == pytest.approx(e.stats["predicted_ms"], abs=2e-3) for e in done)
    assert all(e.stats["predicted_ms"] > 0 for e in done)


def test_the_trace_is_stamped_with_simulated_time(tmp_path):
    path = tmp_path / "sim.jsonl"
    llm = _engine(trace=path)
    result = llm.run_workload(make_workload(5, Replay([0.0, 1.0, 2.0, 3.0, 50.0]), Fixed(30), Fixed(4),
                                            vocab_size=SHAPE.vocab_size))
    llm.close()
    trace = load_trace(path)
    assert trace.header["device"] == "h100-sxm" and trace.header["config"]["attention_backend"] == "flash_attn"
    assert trace.header["simulated"]["hardware"]["name"] == "h100-sxm"
    ready = trace.events_named("ENGINE_READY")[0]
    assert ready.stats["device"] == "h100-sxm" and ready.stats["eos_token_id"] == SHAPE.eos_token_id
    # 50 simulated seconds pass in milliseconds of wall time: the last step ends just after 50 s.
    assert 50e9 < trace.events[-1].t_ns < 51e9
    assert result.requests[4].arrival_s == pytest.approx(50.0, abs=1e-3)


def test_ignore_eos_runs_every_request_to_max_tokens():
    workload = _poisson(20)
    result, _, _ = _run(workload, ignore_eos=True)
    assert {t.finish_reason for t in result.requests.values()} == {"length"}
    assert result.output_tokens == sum(r.output_len for r in workload)


def test_shared_prefixes_hit_the_cache_and_save_time():
    workload = _poisson(80, shared_prefix=SharedPrefix(num_groups=2, prefix_len=1024))
    runs = {cache: _run(workload, enable_prefix_caching=cache, hardware="l4", max_model_len=4096)
            for cache in (True, False)}
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
    assert second.arrival_s == pytest.approx(100.0) and second.first_token_s > 100.0
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
    times = {policy: _engine("l4", max_num_seqs=32, scheduling_policy=policy).run_workload(workload).duration_s
             for policy in ("continuous", "static")}
    assert times["static"] > 1.2 * times["continuous"]


def test_the_simulated_engine_takes_token_ids_only_and_returns_no_text():
    llm = _engine()
    with pytest.raises(TypeError, match="no tokenizer"):
        llm.generate(["Hello"])
    out = llm.generate([[1, 2, 3]], SamplingParams(max_tokens=5), use_tqdm=False)[0]
    assert out["text"] is None and len(out["token_ids"]) == 5 and out["finish_reason"] == "length"


def test_a_workload_refused_or_interrupted_leaves_the_engine_empty(monkeypatch):
    llm = _engine(num_kvcache_blocks=4)
    with pytest.raises(ValueError, match="could never fit"):
        llm.run_workload([Request(0.0, [5] * 20, output_len=5), Request(0.0, [5] * 20, output_len=5000)])
    answers = llm.model_runner.answers  # the AnswerLengths the workload tells the simulated model
    assert answers is llm.answers
    assert llm.is_finished() and not answers._lengths, "the lengths of a refused workload are forgotten"
    calls = []

    def stop(*args):
        calls.append(dict(answers._lengths))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real_run(*args)

    real_run = llm.model_runner.run
    monkeypatch.setattr(llm.model_runner, "run", stop)
    with pytest.raises(KeyboardInterrupt):
        llm.run_workload([Request(0.0, [5] * 20, output_len=50)])
    bm = llm.scheduler.block_manager
    assert llm.is_finished() and bm.num_free_blocks == bm.num_blocks
    assert calls[0], "the workload told the model its lengths while it ran"
    assert not answers._lengths, "the lengths of an interrupted workload are forgotten"


@pytest.mark.parametrize("settings, error, match", [
    (dict(runner="simulated"), ValueError, "needs hardware"),
    (dict(runner="simulated", hardware="h100"), ValueError, "'h100'"),
    (dict(runner="fake"), ValueError, "runner must be one of"),
    (dict(hardware="h100-sxm"), ValueError, "needs runner='simulated'"),
    (dict(runner="simulated", hardware="h100-sxm", tensor_parallel_size=3), ValueError, "tensor_parallel_size=3"),
])
def test_bad_simulation_settings_are_named(settings, error, match):
    with pytest.raises(error, match=match):
        LLM("qwen3-8b", **settings)
    with pytest.raises(ValueError, match="neither a shipped shape"):
        LLM("qwen3-9b", runner="simulated", hardware="h100-sxm")


def test_fitted_factors_come_from_a_json_file(tmp_path):
    slow = tmp_path / "slow.json"
    from nanovllm_teach.sim.efficiency import Efficiency
    slow.write_text(json.dumps(Efficiency.for_device("h100-sxm").to_dict() | {"memory": 0.2}))  # the same API server
    workload = make_workload(20, AtOnce(), Fixed(100), Fixed(50), vocab_size=SHAPE.vocab_size)
    durations = {f: _engine(sim_factors=f).run_workload(workload).duration_s for f in (None, str(slow))}
    assert durations[str(slow)] > 1.5 * durations[None]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"speed": 2}))
    with pytest.raises(ValueError, match="unknown efficiency factor"):
        _engine(sim_factors=str(bad))


def test_a_served_frontend_delays_each_request_and_counts_in_its_ttft(tmp_path):
    """Factors with ``frontend_s`` (the served calibration's): each request joins the engine that much after it
    arrives; its TTFT and end-to-end latency grow by exactly that when the engine is otherwise idle, its TPOT
    not at all. Closed loop, each request is stamped as sent when its client sent it."""
    served = tmp_path / "served.json"
    from nanovllm_teach.sim.efficiency import Efficiency
    served.write_text(json.dumps(Efficiency.for_device("h100-sxm").to_dict() | {"frontend_s": 0.004}))
    workload = make_workload(3, Replay([0.0, 10.0, 20.0]), Fixed(10), Fixed(5), vocab_size=SHAPE.vocab_size)
    plain, delayed = (_engine(sim_factors=f).run_workload(workload) for f in (None, str(served)))
    for k in range(3):
        a, b = plain.requests[k], delayed.requests[k]
        assert b.arrival_s == pytest.approx(a.arrival_s)
        assert b.ttft_s == pytest.approx(a.ttft_s + 0.004) and b.tpot_s == pytest.approx(a.tpot_s)
    closed = _engine(sim_factors=str(served))
    from nanovllm_teach.workload.arrivals import ApiServer, serve_workload
    result = serve_workload(closed, workload, concurrency=1, answers=closed.answers, server=closed.server)
    assert min(t.ttft_s for t in result.requests.values()) > 0.004
    for bad in (-0.001, float("nan"), True, "4 ms"):
        with pytest.raises(ValueError, match="latency_s"):
            ApiServer(latency_s=bad)
