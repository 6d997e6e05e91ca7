"""FP8 weights in the simulator (``quantization="fp8"``, vLLM's ``--quantization fp8``): what they change in a
step and in memory, counted from the shape; where they are refused; the command lines that take them; and the
published FP8 runs that judge them."""

from __future__ import annotations

import dataclasses

import pytest

from nanovllm_teach import LLM
from nanovllm_teach.cli import main
from nanovllm_teach.i18n import speaking
from nanovllm_teach.plan.probes import Candidate, PlanWorkload, memory_fit
from nanovllm_teach.plan.results import simulate_command
from nanovllm_teach.settings import Settings
from nanovllm_teach.sim.budget import estimated_kv_blocks, kv_block_bytes_per_rank, weight_bytes
from nanovllm_teach.sim.cost_model import StepCostModel, load_shape
from nanovllm_teach.sim.efficiency import Efficiency
from nanovllm_teach.sim.hardware import DEVICES
from nanovllm_teach.sim.published import load_cases
from nanovllm_teach.trace.console import text_width

SHAPE = load_shape("llama-3.1-8b")
H100 = DEVICES["h100-sxm"]
# The roofline alone: every share 1, no fixed costs, so a step is its bytes or its FLOPs at the peaks.
BARE = Efficiency(matmul=1, attention=1, memory=1, interconnect=1, fp8_matmul=1, kernel_launch_s=0,
                  graph_launch_s=0, allreduce_latency_s=0, step_overhead_s=0, seq_overhead_s=0)


def _model(quantization, efficiency=BARE, device=H100, tp=1):
    return StepCostModel(SHAPE, device, efficiency, tp, quantization)


def test_fp8_stores_the_linear_weights_in_one_byte_and_keeps_the_rest_16_bit():
    bf16, fp8 = _model(None), _model("fp8")
    linear = SHAPE.num_layers * SHAPE.linear_params_per_layer
    assert weight_bytes(bf16) - weight_bytes(fp8) == linear  # one byte saved per linear weight, nothing else
    assert weight_bytes(fp8) == linear + 2 * (SHAPE.num_params - linear)
    assert fp8.kv_bytes_per_token == bf16.kv_bytes_per_token  # the KV cache follows the activations: 16-bit
    assert fp8.weight_bytes == bf16.weight_bytes - linear  # what a step reads: the LM head stays 16-bit


def test_fp8_fits_more_kv_blocks_by_the_bytes_its_weights_free():
    per_block = kv_block_bytes_per_rank(SHAPE, 2, 1, 256)
    freed = SHAPE.num_layers * SHAPE.linear_params_per_layer
    blocks = {q: estimated_kv_blocks(_model(q), 0.9, 8192, 16384, 256, 256) for q in (None, "fp8")}
    assert blocks["fp8"] > blocks[None]
    assert abs(blocks["fp8"] - blocks[None] - freed / per_block) <= 1  # floors on both sides


def test_a_memory_bound_decode_drops_by_the_weight_bytes_ratio():
    decode = [(1, 100)] * 4  # four sequences, short contexts: the weights are nearly all a step reads
    bf16, fp8 = _model(None).step(decode), _model("fp8").step(decode)
    assert bf16.bound == fp8.bound == "memory"
    assert fp8.total_s / bf16.total_s == pytest.approx(fp8.bytes / bf16.bytes)
    assert fp8.total_s / bf16.total_s == pytest.approx(_model("fp8").weight_bytes / _model(None).weight_bytes,
                                                        rel=0.01)


def test_a_prefill_runs_the_linear_layers_at_the_fp8_peak_and_the_rest_at_16_bit():
    prefill = [(4096, 0)]
    fp8 = _model("fp8")
    counts = fp8.counts(prefill)
    layers = fp8.linear_flops_per_token * 4096
    assert counts.fp8_flops == layers and _model(None).counts(prefill).fp8_flops == 0
    expected = (layers / H100.fp8_flops + (counts.linear_flops - layers) / H100.peak_flops
                + counts.attention_flops / H100.peak_flops)
    cost = fp8.step(prefill)
    assert cost.bound == "compute" and cost.compute_s == pytest.approx(expected)


def test_fp8s_fixed_cost_is_paid_per_layer_and_only_with_fp8():
    per_layer = dataclasses.replace(BARE, fp8_layer_s=1e-5)
    decode = [(1, 100)]
    assert (_model("fp8", per_layer).step(decode).total_s - _model("fp8").step(decode).total_s
            == pytest.approx(SHAPE.num_layers * 1e-5))
    assert _model(None, per_layer).step(decode).total_s == _model(None).step(decode).total_s


@pytest.mark.parametrize("gpu", ["a100-80gb", "a100-40gb"])
def test_fp8_on_a_gpu_without_fp8_tensor_cores_is_refused_naming_it_and_those_with_them(gpu):
    for make in (lambda: _model("fp8", device=DEVICES[gpu]),
                 lambda: LLM("qwen3-0.6b", runner="simulated", hardware=gpu, quantization="fp8")):
        with pytest.raises(ValueError, match=f"{gpu} has no FP8 tensor cores") as refused:
            make()
        assert "h100-sxm" in str(refused.value) and "l4" in str(refused.value)


def test_quantization_is_a_simulated_setting_with_named_choices():
    with pytest.raises(ValueError, match="needs runner='simulated'"):
        Settings(quantization="fp8")
    with pytest.raises(ValueError, match="'int4'"):
        Settings(runner="simulated", hardware="h100-sxm", quantization="int4")
    with pytest.raises(ValueError, match="'int4'"):
        _model("int4")


def _status(argv: list[str]) -> int:
    """The exit status of a command line: ``main``'s, or argparse's (it exits itself on a bad choice)."""
    try:
        return main(argv)
    except SystemExit as exit_:
        return exit_.code


def test_simulate_takes_quantization_and_says_so(tmp_path, capsys):
    trace = tmp_path / "fp8.jsonl"
    assert main(["simulate", "--model", "qwen3-0.6b", "--hardware", "l4", "--quantization", "fp8", "--requests", "20",
                 "--rate", "50", "--out", str(trace)]) == 0
    assert "fp8 weights" in capsys.readouterr().out
    from nanovllm_teach.trace.reader import load_trace

    header = load_trace(trace).header
    assert header["config"]["quantization"] == "fp8"
    assert header["simulated"]["hardware"]["fp8_flops"] == DEVICES["l4"].fp8_flops


@pytest.mark.parametrize("argv, message", [
    (["--quantization", "int4"], "invalid choice: 'int4'"),
    (["--hardware", "a100-80gb", "--quantization", "fp8"], "a100-80gb has no FP8 tensor cores"),
])
def test_simulate_refuses_a_bad_quantization_in_one_line(capsys, argv, message):
    assert _status(["simulate", "--requests", "5", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_list_shows_each_gpus_fp8_peak_or_none(capsys):
    assert main(["simulate", "--list"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("  ")}
    assert f"{H100.fp8_flops / 1e12:.1f} fp8" in rows["h100-sxm"] and "no fp8" in rows["a100-80gb"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_list_keeps_its_columns_in_both_languages(capsys, lang):
    """The memory column starts at the same terminal column on every GPU's line, with fp8 or without: "无 fp8"
    takes 6 columns for its 5 characters, and was once padded by characters."""
    with speaking(lang):
        assert main(["simulate", "--list"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if " GB/s, " in line]
    assert any(("无 fp8" if lang == "zh" else "no fp8") in row for row in rows)
    assert len({text_width(row.split(" GB/s, ")[0]) for row in rows}) == 1


WORKLOAD = PlanWorkload("llama-3.1-8b", "uniform:16:64", "uniform:4:16", max_model_len=2048, warmup_requests=100)


def test_plans_quantization_axis_is_a_candidates_setting():
    fp8, bf16 = Candidate("l4", 1, 64, 2048, "fp8"), Candidate("l4", 1, 64, 2048)
    assert fp8.key == bf16.key + "/fp8"
    assert memory_fit(fp8, WORKLOAD).weights_gib < memory_fit(bf16, WORKLOAD).weights_gib
    assert memory_fit(fp8, WORKLOAD).kv_blocks > memory_fit(bf16, WORKLOAD).kv_blocks
    assert simulate_command(fp8, WORKLOAD, 1.0).endswith("--quantization fp8")
    assert "--quantization" not in simulate_command(bf16, WORKLOAD, 1.0)


def test_plan_skips_fp8_on_gpus_without_it_with_a_note(capsys):
    from nanovllm_teach.cli import plan as plan_cli

    args = plan_cli.argparse.Namespace(gpus="l4,a100-80gb", tp="1", max_num_seqs="64", max_num_batched_tokens="2048",
                                       quantization="none,fp8")
    candidates = plan_cli._space(args, {"l4": 1.0, "a100-80gb": 2.0})
    assert [(c.hardware, c.quantization) for c in candidates] == [("l4", None), ("l4", "fp8"), ("a100-80gb", None)]
    assert "skipped on a100-80gb" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--gpus", "a100-80gb", "--quantization", "fp8"], "none of --gpus (a100-80gb) has FP8 tensor cores"),
    (["--quantization", "fp8,fp8"], "--quantization must list distinct values"),
    (["--quantization", "int4"], "--quantization must list distinct values"),
])
def test_plan_refuses_a_bad_quantization_list_in_one_line(capsys, argv, message):
    assert _status(["plan", "--rate", "10", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_published_fp8_runs_are_judged_and_fitted_apart():
    fp8 = [c for c in load_cases() if c.quantization == "fp8"]
    judged = [c for c in fp8 if c.role == "judged"]
    # judged on one GPU and under tensor parallelism, never on a case that chose a factor
    assert len(judged) >= 2 and {1, 2} <= {c.engine_settings.get("tensor_parallel_size", 1) for c in judged}
    assert all(c.source.startswith("https://github.com/") and "/blob/" in c.source for c in fp8)
    assert all(c.hardware in DEVICES and DEVICES[c.hardware].fp8_flops for c in fp8)
