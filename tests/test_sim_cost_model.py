"""The step-time model: FLOPs and bytes counted by hand on a tiny shape, and the directions a roofline must
move in (more work never takes less time; the bound flips from memory to compute as a batch grows)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from nanovllm_teach.sim.cost_model import ModelShape, StepCostModel, load_shape, shape_names
from nanovllm_teach.sim.efficiency import GPU_API_SERVER, Efficiency
from nanovllm_teach.sim.hardware import DEVICES, Device, get_device

TINY = ModelShape(name="tiny", hidden_size=8, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=4,
                  intermediate_size=16, vocab_size=32, tie_word_embeddings=True, max_position_embeddings=64,
                  eos_token_id=2)
SLOW_GPU = Device("slow", "gpu", "float32", peak_flops=1e3, memory_bandwidth=1e3, memory_bytes=10**6,
                  interconnect_bandwidth=1e3, interconnect="test link", source="test")
EXACT = Efficiency(matmul=1, attention=1, memory=1, interconnect=1, kernel_launch_s=0, graph_launch_s=0,
                   allreduce_latency_s=0, step_overhead_s=0, seq_overhead_s=0)


def test_counts_by_hand_on_a_tiny_shape():
    # One sequence computes 3 new tokens after 2 cached ones.
    cost = StepCostModel(TINY, SLOW_GPU, EXACT).step([(3, 2)])
    # Linear weights per layer: q 8*2*4 + k, v 2*8*1*4 + o 2*4*8 = 192, gate/up/down 3*8*16 = 384.
    linear = 2 * 2 * (192 + 384) * 3  # 2 FLOPs per weight, 2 layers, 3 tokens
    lm_head = 2 * 8 * 32 * 1  # the last token only
    attended = 3 * 2 + (1 + 2 + 3)  # every new token sees the 2 cached ones and the new ones up to itself
    attention = 4 * 2 * 2 * 4 * attended  # QK^T and PV: 4 FLOPs per head dim, 2 heads, 2 layers
    assert cost.flops == linear + lm_head + attention == 8192
    weights = (2 * (192 + 384) + 32 * 8) * 4  # float32; the tied embedding is read once, as the LM head
    kv = (5 + 3) * 2 * 2 * 1 * 4 * 4  # 5 context rows read, 3 new rows written; K and V, 2 layers, 1 KV head
    # Activations per token and layer: qkv in 8 out 16, o in 8 out 8, gate_up in 8 out 32, down in 16 out 8,
    # silu-and-mul 48, two fused add+norms 64, attention reads q and writes its output 16; + the embedding row.
    activations = (2 * (24 + 16 + 40 + 24 + 48 + 64 + 16) + 8) * 4 * 3
    logits = 32 * 8
    assert cost.bytes == weights + kv + activations + logits == 12064
    assert cost.compute_s == pytest.approx(8192 / 1e3)
    assert cost.memory_s == pytest.approx(12064 / 1e3)
    assert cost.bound == "memory" and cost.total_s == pytest.approx(cost.memory_s)


def test_parameter_counts_match_the_model_names():
    expected = {"qwen3-0.6b": 0.6, "qwen3-1.7b": 1.7, "qwen3-4b": 4.0, "qwen3-8b": 8.2, "qwen3-14b": 14.8,
                "qwen3-32b": 32.8, "llama-3.1-8b": 8.0, "llama-3.1-70b": 70.6, "qwen2.5-7b": 7.6}
    assert shape_names() == sorted(expected)
    for name, billions in expected.items():
        assert load_shape(name).num_params / 1e9 == pytest.approx(billions, rel=0.03), name


def test_more_work_never_takes_less_time():
    model = StepCostModel(load_shape("qwen3-8b"), DEVICES["h100-sxm"])
    decode = [model.step([(1, 500)] * b, None).total_s for b in (1, 8, 64, 256)]
    assert decode == sorted(decode)
    longer = [model.step([(1, c)] * 32).total_s for c in (100, 1000, 4000)]
    assert longer == sorted(longer)
    prefill = [model.step([(n, 0)]).total_s for n in (16, 256, 2048, 8192)]
    assert prefill == sorted(prefill) and prefill[-1] > 100 * prefill[0] / 16


def test_the_bound_flips_from_memory_to_compute_as_the_batch_grows():
    model = StepCostModel(load_shape("qwen3-8b"), DEVICES["h100-sxm"])
    assert model.step([(1, 1000)] * 16, 16).bound == "memory"
    assert model.step([(4096, 0)]).bound == "compute"


def test_faster_memory_helps_only_memory_bound_steps():
    shape = load_shape("qwen3-8b")
    h100, h200 = (StepCostModel(shape, DEVICES[name]) for name in ("h100-sxm", "h200"))
    decode = [(1, 2000)] * 64
    assert h200.step(decode, 64).total_s < 0.8 * h100.step(decode, 64).total_s
    prefill = [(8192, 0)]  # same datasheet FLOP/s: the same time, give or take the memory it also moves
    assert h200.step(prefill).total_s == pytest.approx(h100.step(prefill).total_s, rel=0.02)


def test_a_small_eager_decode_is_launch_bound_and_a_graph_fixes_it():
    model = StepCostModel(load_shape("qwen3-0.6b"), DEVICES["h100-sxm"])
    eager, graph = model.step([(1, 100)] * 4, None), model.step([(1, 100)] * 4, 4)
    assert eager.bound == "launch" and graph.bound == "memory"
    assert graph.total_s < eager.total_s
    # A graph computes its whole bucket: 11 sequences in the bucket of 16 cost what 16 would.
    padded = model.step([(1, 100)] * 11, 16)
    assert padded.flops > model.step([(1, 100)] * 11, None).flops


def test_tensor_parallelism_splits_the_work_and_pays_for_the_all_reduces():
    shape, device = load_shape("qwen3-32b"), DEVICES["h100-sxm"]
    one, four = StepCostModel(shape, device), StepCostModel(shape, device, tensor_parallel_size=4)
    batch = [(1, 1000)] * 64
    assert one.step(batch, 64).comm_s == 0
    assert four.step(batch, 64).comm_s > 0
    assert four.step(batch, 64).memory_s == pytest.approx(one.step(batch, 64).memory_s / 4, rel=0.05)
    pcie = dataclasses.replace(device, interconnect_bandwidth=32e9)
    assert StepCostModel(shape, pcie, tensor_parallel_size=4).step(batch, 64).comm_s > four.step(batch, 64).comm_s


def test_efficiency_factors_are_validated_and_load_from_json(tmp_path):
    with pytest.raises(ValueError, match="matmul"):
        Efficiency(matmul=1.5)
    with pytest.raises(ValueError, match="step_overhead_s"):
        Efficiency(step_overhead_s=-1)
    path = tmp_path / "fitted.json"
    path.write_text('{"matmul": 0.3, "step_overhead_s": 0.002}')
    fitted = Efficiency.from_json(path)
    assert fitted.matmul == 0.3 and fitted.step_overhead_s == 0.002 and fitted.memory == Efficiency().memory
    path.write_text('{"matmull": 0.3}')
    with pytest.raises(ValueError, match="matmull"):
        Efficiency.from_json(path)


def test_unknown_names_are_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="h100-sxm"):
        get_device("h100")
    with pytest.raises(ValueError, match="qwen3-8b"):
        load_shape("qwen3-9b")


def test_this_cpu_is_measured():
    cpu = get_device("this-cpu")
    assert cpu.kind == "cpu" and cpu.dtype == "float32"
    assert 1e8 < cpu.peak_flops < 1e14 and 1e8 < cpu.memory_bandwidth < 1e13 and cpu.memory_bytes > 2**28


SLOW_CPU = dataclasses.replace(SLOW_GPU, name="slow-cpu", kind="cpu")


def test_a_cpu_prefill_pays_every_kernel_and_the_native_decode_one_call():
    eff = dataclasses.replace(EXACT, kernel_launch_s=2.0, graph_launch_s=0.5, kernels_per_layer=10)
    model = StepCostModel(TINY, SLOW_CPU, eff)
    eager, native = model.step([(1, 5)]), model.step([(1, 5)], native=True)
    assert eager.launch_s == 2 * 10 * 2.0 and native.launch_s == 0.5  # 2 layers x 10 kernels, or one call
    assert eager.total_s - native.total_s == pytest.approx(40.0 - 0.5)
    assert native.flops == eager.flops and native.bytes == eager.bytes  # one call, no padding


def test_a_step_after_an_idle_wait_pays_wake_s_and_only_it():
    model = StepCostModel(TINY, SLOW_CPU, dataclasses.replace(EXACT, wake_s=3.0))
    warm, cold = model.step([(7, 0)]), model.step([(7, 0)], after_idle=True)
    assert cold.total_s - warm.total_s == pytest.approx(3.0) and cold.host_s == warm.host_s + 3.0
    assert Efficiency().wake_s == 0  # a GPU's default: nothing fitted, nothing charged


def test_this_cpu_uses_the_shipped_calibration_and_every_factor_is_named():
    from nanovllm_teach.sim.efficiency import THIS_CPU_FACTORS, THIS_CPU_SERVED_FACTORS

    shipped = json.loads(THIS_CPU_FACTORS.read_text())
    served = Efficiency.from_json(THIS_CPU_SERVED_FACTORS)
    assert set(shipped) == set(json.loads(THIS_CPU_SERVED_FACTORS.read_text())) == {
        f.name for f in dataclasses.fields(Efficiency)}  # a refit writes every factor
    assert Efficiency.for_device("this-cpu") == Efficiency.from_dict(shipped)
    assert Efficiency.for_device("this-cpu") != Efficiency()
    assert Efficiency.for_device("a100-40gb") == Efficiency(**GPU_API_SERVER)  # no fitted case: the defaults
    # The served calibration refits the host terms alone: the same device, the same shares of its peaks.
    assert [getattr(served, name) for name in ("matmul", "attention", "memory")] == [
        shipped[name] for name in ("matmul", "attention", "memory")]


def test_only_memory_may_exceed_its_peak_as_a_cache_does():
    assert Efficiency(memory=2.5).memory == 2.5  # a small model's weights read from a CPU's cache
    with pytest.raises(ValueError, match="memory must be in"):
        Efficiency(memory=5.0)
    with pytest.raises(ValueError, match="attention"):
        Efficiency(attention=1.2)
