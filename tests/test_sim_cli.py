"""``nanovllm-teach simulate``: its parser (added to the main CLI by ``add_simulate_parser``), its output, and
its mistakes as one-line ValueErrors."""

from __future__ import annotations

import argparse
import re

import pytest

from nanovllm_teach.cli.simulate import add_simulate_parser
from nanovllm_teach.i18n import speaking
from nanovllm_teach.trace.reader import load_trace


def _simulate(*argv):
    parser = argparse.ArgumentParser(prog="nanovllm-teach")
    add_simulate_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["simulate", *argv])
    return args.func(args)


def test_simulate_prints_the_serving_figures_and_writes_a_trace(tmp_path, capsys):
    out = tmp_path / "sim.jsonl"
    assert _simulate("--model", "qwen3-8b", "--hardware", "h100-sxm", "--rate", "8", "--requests", "40",
                     "--out", str(out)) == 0
    printed = capsys.readouterr().out
    assert "40 requests of qwen3-8b on h100-sxm" in printed
    for figure in ("tok/s", "TTFT (from arrival) p50", "p99", "TPOT p50", "by bound: compute"):
        assert figure in printed
    trace = load_trace(out)
    assert len(trace.requests) == 40 and trace.header["device"] == "h100-sxm"
    assert all(r.finish_reason == "eos" for r in trace.requests)
    assert f"nanovllm-teach replay {out}  (every step: --all)" in printed and "--html" in printed


def test_concurrency_runs_a_closed_loop(tmp_path, capsys):
    out = tmp_path / "sim.jsonl"
    assert _simulate("--model", "qwen3-0.6b", "--hardware", "l4", "--concurrency", "4", "--requests", "20",
                     "--out", str(out)) == 0
    steps = load_trace(out).steps
    assert max(row.waiting_in_step + row.running_in_step for row in steps) == 4


def test_workload_options_reach_the_engine(tmp_path):
    out = tmp_path / "sim.jsonl"
    _simulate("--model", "qwen3-0.6b", "--hardware", "l4", "--arrivals", "burst:10:1", "--requests", "20",
              "--prompt-lens", "fixed:100", "--output-lens", "uniform:5:9", "--shared-prefix", "2:512",
              "--max-num-seqs", "8", "--ignore-eos", "--out", str(out))
    trace = load_trace(out)
    assert {r.prompt_len for r in trace.requests} == {612}
    assert max(s.batch_size for s in trace.steps) <= 8
    assert trace.events_named("PREFIX_CACHE_HIT") and {r.finish_reason for r in trace.requests} == {"length"}
    assert trace.header["config"]["max_num_seqs"] == 8



def test_this_cpu_sizes_its_kv_cache_as_the_real_engine_does(capsys):
    """Without --num-kvcache-blocks, this CPU's KV blocks come from the real engine's CPU cap (a share of the
    memory available, at most what the limits can fill): it once multiplied an unset cpu_kvcache_gib."""
    from nanovllm_teach.sim.cost_model import load_shape
    from nanovllm_teach.utils.memory import CPU_KV_SHARE, kv_block_bytes, read_memory

    assert _simulate("--model", "qwen3-0.6b", "--hardware", "this-cpu", "--requests", "3", "--max-num-seqs", "4",
                     "--max-model-len", "1024") == 0
    printed = capsys.readouterr().out
    blocks = int(printed.split("(tp=1), ")[1].split(" KV blocks")[0])
    shape = load_shape("qwen3-0.6b")
    per_block = kv_block_bytes(shape.num_layers, 256, shape.num_kv_heads, shape.head_dim, 4)
    by_memory = int(read_memory(__import__("torch").device("cpu")).free * CPU_KV_SHARE) // per_block
    assert 0 < blocks <= 4 * (1024 // 256) and (blocks == 4 * (1024 // 256) or abs(blocks - by_memory) <= 1)

def test_list_names_every_model_and_device(capsys):
    assert _simulate("--list") == 0
    printed = capsys.readouterr().out
    assert "qwen3-32b" in printed and "rtx-4070-laptop" in printed and "this-cpu" in printed
    assert "serving engines" in printed and "vllm-0.5" in printed and "vllm-0.6" in printed
    with speaking("zh"):
        assert _simulate("--list") == 0
    printed = capsys.readouterr().out
    assert "模型形状" in printed and "服务引擎" in printed and "用 " in printed and "本机的 CPU" in printed


def test_a_serving_engines_costs_are_said_and_change_a_tensor_parallel_decode(capsys):
    tpot = {}
    for engine in ((), ("--serving-engine", "vllm-0.5"), ("--serving-engine", "vllm-0.6")):
        assert _simulate("--model", "qwen3-8b", "--hardware", "h100-sxm", "--tensor-parallel-size", "4", "--rate",
                         "20", "--requests", "40", *engine) == 0
        printed = capsys.readouterr().out
        assert (f"{engine[1]}'s serving costs" in printed) if engine else "serving costs" not in printed
        tpot[engine[1:]] = re.search(r"TPOT p50 ([0-9.]+)", printed).group(1)
    # each engine's collectives cost their own time: the older engine's least, the newer one's most
    assert float(tpot[("vllm-0.5",)]) < float(tpot[()]) < float(tpot[("vllm-0.6",)])


@pytest.mark.parametrize("argv, match", [
    (["--hardware", "h100"], "unknown hardware 'h100'"),
    (["--model", "qwen3-9b"], "neither a shipped shape"),
    (["--rate", "0"], "Poisson rate"),
    (["--rate", "2", "--arrivals", "at-once"], "one of --rate, --arrivals or --concurrency"),
    (["--rate", "2", "--concurrency", "4"], "one of --rate, --arrivals or --concurrency"),
    (["--concurrency", "0"], "--concurrency must be >= 1"),
    (["--admit-every", "0"], "--admit-every must be in 1..1024"),
    (["--arrivals", "poison:3"], "unknown arrival spec"),
    (["--prompt-lens", "uniform:5"], "unknown length spec"),
    (["--shared-prefix", "3"], "GROUPS:LEN"),
    (["--requests", "0"], "num_requests"),
    (["--policy", "fifo"], "scheduling_policy"),
    (["--factors", "/no/such/file.json"], "sim_factors"),
])
def test_mistakes_are_one_line_value_errors(argv, match):
    with pytest.raises(ValueError, match=match):
        _simulate("--requests", "5", *argv) if "--requests" not in argv else _simulate(*argv)


def test_out_must_be_a_file(tmp_path):
    with pytest.raises(ValueError, match="is a folder"):
        _simulate("--requests", "5", "--out", str(tmp_path))


def test_out_that_cannot_be_written_is_named_in_both_languages():
    with pytest.raises(ValueError, match="--out /proc/x.jsonl cannot be written"):
        _simulate("--requests", "5", "--out", "/proc/x.jsonl")
    with speaking("zh"), pytest.raises(ValueError, match="--out /proc/x.jsonl 无法写入"):
        _simulate("--requests", "5", "--out", "/proc/x.jsonl")


def test_simulate_prints_its_figures_in_chinese(capsys):
    with speaking("zh"):
        assert _simulate("--model", "qwen3-0.6b", "--hardware", "l4", "--rate", "8", "--requests", "10",
                         "--quantization", "fp8") == 0
    printed = capsys.readouterr().out
    assert "qwen3-0.6b 在 l4（tp=1，FP8 权重）上处理了 10 个请求" in printed
    assert "模拟结果：" in printed and "首 token 延迟 TTFT（从到达算起）p50" in printed and "抢占 0 次" in printed
