"""``benchmarks/gpu_check.py`` and its sections, without a GPU: the random checkpoint, the workloads, the
verdicts, how the parent judges a section that crashes or hangs, and the whole ``--cpu-dry-run`` (offline
install into a fresh virtual environment, every section in its CPU stand-in)."""

from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from nanovllm_teach import LLM, SamplingParams
from nanovllm_teach.trace import load_trace

ROOT = Path(__file__).resolve().parents[1]
GPU_DIR = ROOT / "benchmarks" / "gpu"


@pytest.fixture(scope="module")
def gpu():
    """The section modules (they import each other by plain name, as ``run_section.py`` arranges)."""
    sys.path.insert(0, str(GPU_DIR))
    try:
        yield {name: importlib.import_module(name) for name in ("common", "sec_engine")}
    finally:
        sys.path.remove(str(GPU_DIR))
        for name in ("common", "sec_engine"):
            sys.modules.pop(name, None)


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules["gpu_check"]


def test_checkpoint_loads_in_both_engines(gpu, tmp_path):
    common = gpu["common"]
    path = common.write_checkpoint(tmp_path / "ckpt", common.TINY, torch.float32)
    config = json.loads((path / "config.json").read_text())
    assert config["vocab_size"] == 4096 and config["tie_word_embeddings"] and config["head_dim"] == 16
    hf = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    prompt = [5, 900, 4000, 17]
    ref = common.hf_reference(hf, [prompt], 6, eos=-1)
    assert common.greedy_margins(hf, prompt, ref[0]) == [0.0] * len(ref[0])
    llm = LLM(path, device="cpu", max_model_len=64)
    ours = llm.generate([prompt], SamplingParams(temperature=0.0, max_tokens=6, ignore_eos=True), use_tqdm=False)
    assert ours[0]["token_ids"] == ref[0]

    judge = gpu["sec_engine"].judge
    assert judge("x", [ref[0]], ref, hf, [prompt], 1e-3) == (True, "x: 1/1 prompts token-identical")
    logits = hf(torch.tensor([prompt])).logits[0, -1]
    second = int(logits.topk(2).indices[1])  # the first token's runner-up: a margin well above 1e-3
    ok, line = judge("x", [[second] + ref[0][1:]], ref, hf, [prompt], 1e-3)
    assert not ok and "WRONG TOKENS" in line and "prompt 0 @ token 0" in line


def test_model_is_qwen3_0_6b_shaped(gpu):
    shape = gpu["common"].QWEN3_0_6B
    assert (shape["hidden_size"], shape["num_hidden_layers"], shape["num_attention_heads"],
            shape["num_key_value_heads"], shape["head_dim"], shape["intermediate_size"],
            shape["vocab_size"], shape["tie_word_embeddings"]) == (1024, 28, 16, 8, 128, 3072, 151936, True)


def test_bench_workload_is_nano_vllms(gpu):
    make = gpu["common"].make_bench_workload
    prompts, max_tokens = make(256, seed=0)
    assert len(prompts) == len(max_tokens) == 256
    assert all(100 <= len(p) <= 1024 for p in prompts) and all(100 <= n <= 1024 for n in max_tokens)
    assert all(0 <= t <= 10000 for p in prompts for t in p)
    assert make(4, seed=1) == make(4, seed=1)


def test_graph_waves_chunk_and_preempt(gpu, tmp_path):
    common, engine = gpu["common"], gpu["sec_engine"]
    setup = common.Setup("quick", tmp_path, tmp_path, time.time() + 60)
    waves, settings, max_tokens = engine.graph_waves(setup)
    assert [len(w) for w in waves] == [1, 3, 17, 33, 100, 300]
    assert max(len(p) for p in waves[-1]) > settings["max_num_batched_tokens"]  # a prompt is chunked
    block = settings["kvcache_block_size"]
    needed = sum(-(-(len(p) + max_tokens) // block) for p in waves[-1])
    assert needed > settings["num_kvcache_blocks"]                              # the last wave preempts
    largest = max(-(-(len(p) + max_tokens) // block) for w in waves for p in w)
    assert largest <= settings["num_kvcache_blocks"]                            # ... yet every request fits


def _fake_runner(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "fake_section.py"
    script.write_text("import os, signal, sys, time\n" + body + "\n")
    return script


@pytest.mark.parametrize("body,status,words", [
    ("print('VERDICT: PASS fine')", "PASS", "fine"),
    ("print('VERDICT: SKIP no GPU')", "SKIP", "no GPU"),
    ("print('VERDICT: FAIL tokens differ'); sys.exit(1)", "FAIL", "tokens differ"),
    ("print('VERDICT: PASS early'); sys.exit(3)", "FAIL", "exit status 3"),          # a verdict, then a crash
    ("print('half way', flush=True); os.kill(os.getpid(), signal.SIGSEGV)", "FAIL", "exit status -11"),
    ("time.sleep(30)", "FAIL", "timed out after 2 s"),
])
def test_the_parent_judges_each_section(gpu_check, monkeypatch, tmp_path, body, status, words):
    monkeypatch.setattr(gpu_check, "RUNNER", _fake_runner(tmp_path, body))
    result, output = gpu_check.run_section("x", 2, "cpu", sys.executable, {}, tmp_path, tmp_path)
    assert result.status == status and words in result.line, (result, output)


def test_summary_lists_failures(gpu_check, tmp_path):
    Result = gpu_check.Result
    results = [Result("kernels", "PASS", 1.0, "ok"), Result("graphs", "FAIL", 2.0, "crashed"),
               Result("throughput", "NOT RUN", 0.0, "no time left")]
    gpu_check.write_summary(tmp_path, "header", results, finished=True)
    summary = (tmp_path / "summary.txt").read_text()
    assert summary.startswith("header") and summary.rstrip().endswith("failed sections: graphs, throughput")
    assert [r["status"] for r in json.loads((tmp_path / "results.json").read_text())] == ["PASS", "FAIL", "NOT RUN"]


@pytest.mark.slow  # a fresh virtual environment and eight Python processes: about 90 s on two cores
def test_cpu_dry_run_end_to_end(tmp_path):
    wheels = GPU_DIR / "wheels"
    if not any(wheels.glob("*.whl")):
        fetched = subprocess.run([sys.executable, str(GPU_DIR / "prepare_wheels.py")], capture_output=True, text=True)
        if fetched.returncode != 0:
            pytest.skip(f"no wheels in {wheels} and PyPI is unreachable: {fetched.stderr[-300:]}")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_check.py"), "--cpu-dry-run",
                           "--out", str(out)], capture_output=True, text=True, timeout=900)
    summary = (out / "summary.txt").read_text()
    assert done.returncode == 0, done.stdout + done.stderr + summary
    # The fresh environment lacked msgspec and structlog: they came from the wheel folder, offline.
    assert "pip install --no-index --no-deps" in summary and "/site/msgspec/" in summary
    status = {r["name"]: r["status"] for r in json.loads((out / "results.json").read_text())}
    assert status == {"checkpoint": "PASS", "kernels": "PASS", "greedy": "PASS", "graphs": "SKIP", "memory": "SKIP",
                      "tp": "SKIP", "flash": "SKIP", "throughput": "SKIP"}
    assert summary.rstrip().endswith("failed sections: none")
    for name in ("gpu_cudagraph.jsonl", "gpu_throughput.jsonl"):
        events = load_trace(out / name).events
        assert {e.stats["eager_reason"] for e in events if e.event == "RUN_MODEL"} == {"prefill", "no_cuda"}
    assert any(e.event == "PREEMPT" for e in load_trace(out / "gpu_cudagraph.jsonl").events)
