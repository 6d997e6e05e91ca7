"""The simulated runner sizes its KV cache with the real formula and emits the real runner's events."""

from __future__ import annotations

import dataclasses

import pytest

from nanovllm_teach.engine.batch import ScheduledBatch, ScheduledSeq
from nanovllm_teach.engine.teaching import Teaching
from nanovllm_teach.sim.cost_model import load_shape
from nanovllm_teach.sim.hardware import DEVICES, GIB
from nanovllm_teach.sim.budget import GPU_RUNTIME_BYTES
from nanovllm_teach.sim.runner import SimulatedRunner
from nanovllm_teach.trace.recorder import TraceRecorder


def _runner(model="qwen3-8b", hardware="h100-sxm", **settings):
    rec = TraceRecorder()
    rec.open({})
    device = DEVICES[hardware] if isinstance(hardware, str) else hardware
    return SimulatedRunner(load_shape(model), device, recorder=rec, **settings), rec


def _event(rec, name):
    return next(e for e in rec.events if e.event == name)


def test_kv_cache_is_sized_by_the_memory_formula():
    runner, rec = _runner(max_model_len=4096)
    shape = load_shape("qwen3-8b")
    weights = shape.num_params * 2  # bfloat16
    # Warm-up: 16384 // 4096 = 4 sequences of 4096 tokens; what is alive at once in a layer, per token:
    # hidden + residual (4h), q/k/v, the MLP's gate-up output and its activation (3 * intermediate).
    per_token = 4 * 4096 + (32 + 2 * 8) * 128 + 3 * 12288
    activations = 16384 * per_token * 2 + 4 * 151936 * 4 * 2
    available = int(80 * GIB * 0.9 - (GPU_RUNTIME_BYTES + weights) - (weights + activations) + weights)
    block_bytes = 2 * 36 * 256 * 8 * 128 * 2
    assert runner.num_kvcache_blocks == available // block_bytes
    kv = _event(rec, "KV_BUDGET_ESTIMATE")
    assert kv.reason == "size_kv_cache_from_memory"
    assert kv.stats["num_blocks"] == kv.stats["estimated_num_blocks"] == kv.stats["uncapped_num_blocks"]
    assert kv.stats["block_bytes"] == block_bytes and kv.stats["budget"] == available
    assert kv.stats["limited_by"] == "memory" and kv.stats["cap_bytes"] is None
    assert _event(rec, "WARMUP").stats["peak_bytes"] == weights + activations


def test_more_memory_or_utilization_gives_more_blocks_and_tp_shards_them():
    h100 = _runner()[0].num_kvcache_blocks
    assert _runner(hardware="h200")[0].num_kvcache_blocks > h100
    assert _runner(gpu_memory_utilization=0.5)[0].num_kvcache_blocks < h100
    tp2, rec = _runner(tensor_parallel_size=2)
    assert tp2.num_kvcache_blocks > 2 * h100  # half the KV heads per block, half the weights per GPU
    assert _event(rec, "KV_BUDGET_ESTIMATE").stats["num_kv_heads"] == 4


def test_a_cpu_device_is_capped_and_an_explicit_count_wins():
    cpu = dataclasses.replace(DEVICES["l4"], name="cpu-like", kind="cpu", dtype="float32", memory_bytes=64 * GIB)
    runner, rec = _runner("qwen3-0.6b", cpu, cpu_kvcache_gib=0.25)
    kv = _event(rec, "KV_BUDGET_ESTIMATE")
    assert kv.reason == "size_kv_cache_cpu_cap" and kv.stats["limited_by"] == "cpu_kvcache_gib"
    assert kv.stats["cap_bytes"] == 2**28
    assert runner.num_kvcache_blocks == 2**28 // kv.stats["block_bytes"] < kv.stats["uncapped_num_blocks"]
    assert runner.attention_backend == "cpp" and runner.graph_sizes == []
    runner, rec = _runner(num_kvcache_blocks=7)
    assert runner.num_kvcache_blocks == 7
    assert _event(rec, "KV_BUDGET_ESTIMATE").stats["limited_by"] == "num_kvcache_blocks"


def test_a_model_too_big_for_the_device_is_refused_by_name():
    with pytest.raises(ValueError, match="qwen3-32b on l4"):
        _runner("qwen3-32b", "l4")
    with pytest.raises(ValueError, match="tensor_parallel_size=3"):
        _runner(tensor_parallel_size=3)


def _prefill(seq_id, prompt_len, num_tokens=None):
    """A batch of one prompt (its first ``num_tokens``, a chunk, when given)."""
    tokens = list(range(prompt_len))[:num_tokens]
    return ScheduledBatch(True, [ScheduledSeq(seq_id, tokens, 0, prompt_len, [0, 1, 2], 0.0, None)])


def _decode(*lengths):
    """A decode batch: one sequence per length, each computing its newest token."""
    return ScheduledBatch(False, [ScheduledSeq(i, [7], n - 1, n, [0], 0.0, None) for i, n in enumerate(lengths)])


def _run(runner: SimulatedRunner, rec: TraceRecorder, batch: ScheduledBatch) -> list[int]:
    """One step, and what the runner reports of it said as the engine says it (``Teaching.ran``)."""
    out = runner.run(batch)
    Teaching(rec).ran(batch, out)
    return out.token_ids


def test_run_advances_the_clock_and_emits_eos_at_the_target_length():
    runner, rec = _runner()
    runner.answers.expect(0, 302)
    first = _run(runner, rec, _prefill(0, 300))
    t1 = runner.clock.now_s()
    assert t1 > 0 and first != [runner.eos_token_id]
    assert _event(rec, "RUN_MODEL").stats["eager_reason"] == "prefill"
    assert _run(runner, rec, _decode(301)) == [runner.eos_token_id]
    assert runner.clock.now_s() > t1
    replay = _event(rec, "CUDAGRAPH_REPLAY").stats
    assert replay["graph_batch_size"] == 1 and replay["bound"] in ("memory", "compute")
    assert replay["predicted_ms"] == pytest.approx((runner.clock.now_s() - t1) * 1e3, abs=1e-3)
    stats = runner.step_stats()  # what STEP_DONE carries: the same prediction
    assert stats.keys() == {"predicted_ms", "bound"} and stats["bound"] == replay["bound"]
    assert stats["predicted_ms"] == pytest.approx(replay["predicted_ms"], abs=1e-3)
    assert _run(runner, rec, _decode(301)) == [runner.eos_token_id], "a step run again (after a rollback) answers the same"
    runner.answers.forget([0])
    assert runner.answers.get(0) is None
    assert _run(runner, rec, _decode(301)) == [runner.placeholder_token_id], "a forgotten length ends nothing"


def test_a_prompt_chunk_never_ends_a_sequence():
    runner, _ = _runner()
    runner.answers.expect(0, 601)
    assert runner.run(_prefill(0, 600, num_tokens=256)).token_ids == [runner.placeholder_token_id]  # the first chunk
    with pytest.raises(ValueError, match="sequence length"):
        runner.answers.expect(1, 1)


def test_eager_decode_says_why():
    runner, rec = _runner(enforce_eager=True)
    _run(runner, rec, _decode(10))
    assert _event(rec, "RUN_MODEL").stats["eager_reason"] == "enforce_eager"
    runner, rec = _runner(max_num_seqs=2)
    _run(runner, rec, _decode(10, 10, 10))
    assert _event(rec, "RUN_MODEL").stats["eager_reason"] == "batch_above_largest_graph"


def test_built_from_an_engine_config_on_a_shared_clock():
    """The simulated engine's parts (``sim/engine.py``) build the runner from the engine's config, on the
    clock and the answer lengths the engine shares with it."""
    from nanovllm_teach.settings import Settings
    from nanovllm_teach.sim.engine import simulated_parts

    parts = simulated_parts("qwen3-1.7b", Settings.from_kwargs(dict(
        max_num_batched_tokens=16384, kvcache_block_size=256, runner="simulated", hardware="a100-80gb")))
    parts.clock.wait_until(5.0)
    runner = parts.make_runner(parts.config, TraceRecorder())
    direct = SimulatedRunner(load_shape("qwen3-1.7b"), DEVICES["a100-80gb"], max_num_batched_tokens=16384)
    assert runner.num_kvcache_blocks == direct.num_kvcache_blocks
    assert runner.shape == direct.shape and runner.eos_token_id == parts.eos_token_id == 151645
    assert runner.clock is parts.clock and runner.answers is parts.answers
    runner.run(_prefill(0, 100))
    assert parts.clock.now_s() > 5.0


def test_the_clock_moves_only_forward():
    from nanovllm_teach.sim.runner import SimClock

    clock = SimClock()
    assert clock.now_s() == clock.t_s == 0.0
    clock.advance(1.5)
    clock.wait_until(1.0)  # already past it: time does not run backwards
    assert clock.now_s() == 1.5
    clock.wait_until(4.0)
    assert clock.now_s() == 4.0
    with pytest.raises(AssertionError):
        clock.advance(-1.0)


@pytest.mark.parametrize("model, settings, native", [
    ("qwen3-0.6b", {}, True),
    ("qwen3-0.6b", {"enforce_eager": True}, False),
    ("qwen3-0.6b", {"tensor_parallel_size": 2}, False),
    ("qwen2.5-7b", {}, False),  # attention biases: the native step has none
])
def test_a_cpu_decodes_natively_where_the_real_engine_would(model, settings, native):
    cpu = dataclasses.replace(DEVICES["l4"], name="cpu-like", kind="cpu", dtype="float32", memory_bytes=64 * GIB)
    runner, rec = _runner(model, cpu, **settings)
    _run(runner, rec, _prefill(0, 40))
    assert not runner.last_work.native and runner.last_cost.launch_s > runner.cost_model.eff.graph_launch_s
    _run(runner, rec, _decode(41))
    assert runner.last_work.native is native
    modes = [e.stats["mode"] for e in rec.events if e.event == "RUN_MODEL"]
    assert modes == ["eager", "compiled" if native else "eager"]


def test_the_first_step_after_an_idle_wait_is_marked():
    from nanovllm_teach.sim.runner import SimClock

    runner, _ = _runner("qwen3-0.6b", clock=SimClock())
    runner.run(_prefill(0, 40))
    assert not runner.last_work.after_idle
    runner.clock.wait_until(runner.clock.now_s())  # no time to wait: not idle
    runner.run(_decode(41))
    assert not runner.last_work.after_idle
    runner.clock.wait_until(runner.clock.now_s() + 1.0)
    runner.run(_prefill(1, 40))
    assert runner.last_work.after_idle
    runner.run(_decode(41, 41))
    assert not runner.last_work.after_idle
