"""CUDA graphs for decode: the bucket list, the bucket a batch replays, when a step runs eagerly, and how a
replay fills the static buffers (with a stand-in graph, so it runs on CPU). The capture itself needs a GPU:
``test_graphs_match_eager_on_gpu`` runs only where CUDA is available. Also the parts of
``benchmarks/gpu_check.py`` (the GPU check script) that run without a GPU."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from checkpoints import make_random_checkpoint
from nanovllm_teach import LLM, SamplingParams
from nanovllm_teach.engine.cuda_graphs import (DecodeGraphs, capture_skip_reason, choose_graph_batch_size,
                                               eager_reason, graph_batch_sizes, why_no_graphs)
from nanovllm_teach.trace import TraceRecorder
from nanovllm_teach.utils.context import Context

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def test_buckets_as_nano_vllm():
    assert graph_batch_sizes(512) == [1, 2, 4, 8] + list(range(16, 513, 16))
    assert graph_batch_sizes(4096) == graph_batch_sizes(512)  # capped at 512
    assert graph_batch_sizes(40) == [1, 2, 4, 8, 16, 32]
    assert graph_batch_sizes(3) == [1, 2]
    assert graph_batch_sizes(1) == [1]


def test_smallest_bucket_that_holds_the_batch():
    sizes = graph_batch_sizes(512)
    assert [choose_graph_batch_size(False, bs, sizes) for bs in (1, 2, 3, 5, 8, 9, 16, 17, 500, 512)] == \
        [1, 2, 4, 8, 8, 16, 16, 32, 512, 512]


def test_eager_for_prefill_no_graphs_or_a_batch_too_large():
    sizes = graph_batch_sizes(40)
    assert choose_graph_batch_size(True, 4, sizes) is None
    assert choose_graph_batch_size(False, 4, []) is None
    assert choose_graph_batch_size(False, 33, sizes) is None


def test_when_graphs_are_captured(monkeypatch):
    from nanovllm_teach import kernels
    monkeypatch.setattr(kernels, "INTERPRETED", False)  # as on a GPU, where the kernels are compiled
    assert capture_skip_reason(CUDA, False, "triton") is None
    assert capture_skip_reason(CUDA, False, "flash_attn") is None
    assert "enforce_eager" in capture_skip_reason(CUDA, True, "triton")
    assert "CUDA device" in capture_skip_reason(CPU, False, "triton")
    assert "torch attention backend" in capture_skip_reason(CUDA, False, "torch")
    assert [why_no_graphs(*case).code for case in ((CUDA, True, "triton"), (CPU, False, "triton"),
                                                    (CUDA, False, "torch"))] == \
        ["enforce_eager", "no_cuda", "backend_cannot_capture"]


def test_interpreted_kernels_are_never_captured():
    """TRITON_INTERPRET=1 on a GPU machine: the kernels are Python, and a graph would record none of them."""
    from nanovllm_teach import kernels
    assert kernels.INTERPRETED  # conftest.py sets TRITON_INTERPRET=1
    for backend in ("triton", "flash_attn"):
        skip = why_no_graphs(CUDA, False, backend)
        assert skip.code == "backend_cannot_capture" and "TRITON_INTERPRET" in skip.why


def test_eager_reason_of_each_step():
    no_cuda = why_no_graphs(CPU, False, "triton")
    assert eager_reason(True, None) == eager_reason(True, no_cuda) == "prefill"
    assert eager_reason(False, no_cuda) == "no_cuda"
    assert eager_reason(False, None) == "batch_above_largest_graph"  # graphs exist, none holds the batch


class FakeGraph:
    """Stands in for a captured graph: "replaying" runs a function that reads the static buffers."""

    def __init__(self, fn) -> None:
        self.fn = fn

    def replay(self) -> None:
        self.fn()


def test_replay_fills_static_buffers_and_pads():
    max_bs, width, hidden = 4, 5, 3
    graphs = DecodeGraphs(
        batch_sizes=[1, 2, 4], graphs={}, input_ids=torch.zeros(max_bs, dtype=torch.int64),
        positions=torch.zeros(max_bs, dtype=torch.int64), slot_mapping=torch.zeros(max_bs, dtype=torch.int64),
        context_lens=torch.full((max_bs,), 7, dtype=torch.int32),
        block_tables=torch.zeros(max_bs, width, dtype=torch.int32), outputs=torch.zeros(max_bs, hidden))
    seen = {}

    def forward() -> None:  # what the captured model would do: read inputs, write outputs
        seen.update(slot_mapping=graphs.slot_mapping.clone(), context_lens=graphs.context_lens.clone(),
                    block_tables=graphs.block_tables.clone())
        graphs.outputs[:] = (graphs.input_ids + graphs.positions).unsqueeze(1).float()

    graphs.graphs[4] = FakeGraph(forward)
    ctx = Context(slot_mapping=torch.tensor([17, 40, 3]), context_lens=torch.tensor([2, 9, 4], dtype=torch.int32),
                  block_tables=torch.tensor([[1, -1], [2, 5], [0, -1]], dtype=torch.int32))
    out = graphs.replay(torch.tensor([10, 20, 30]), torch.tensor([1, 8, 3]), ctx, 4)
    assert out.shape == (3, hidden) and out[:, 0].tolist() == [11.0, 28.0, 33.0]
    assert seen["slot_mapping"].tolist() == [17, 40, 3, -1]  # the padding row stores nothing
    assert seen["context_lens"].tolist() == [2, 9, 4, 0]     # ... and attends to nothing
    assert seen["block_tables"][:3, :2].tolist() == ctx.block_tables.tolist()


def test_cpu_engine_runs_eagerly(tmp_path):
    rec = TraceRecorder()
    llm = LLM(make_random_checkpoint(tmp_path), trace=rec, device="cpu", max_model_len=64)
    llm.generate([[1, 2, 3]], SamplingParams(temperature=0.0, max_tokens=3), use_tqdm=False)
    assert llm.model_runner.decode_graphs is None
    events = [e.event for e in rec.events]
    assert "CUDAGRAPH_CAPTURE" not in events and "CUDAGRAPH_REPLAY" not in events
    runs = [e for e in rec.events if e.event == "RUN_MODEL"]
    assert {e.stats["mode"] for e in runs} == {"eager"}
    assert {(e.phase, e.stats["eager_reason"]) for e in runs} == {("prefill", "prefill"), ("decode", "no_cuda")}


GPU_SCRIPT = textwrap.dedent("""
    import sys
    from nanovllm_teach import LLM, SamplingParams
    from nanovllm_teach.trace import TraceRecorder

    prompts = [[1, 2, 3], list(range(5, 40)), [7] * 20]
    greedy = SamplingParams(temperature=0.0, max_tokens=12)
    results = {}
    for eager in (True, False):
        rec = TraceRecorder()
        llm = LLM(sys.argv[1], trace=rec, attention_backend="triton", dtype="float32", kvcache_block_size=16,
                  max_num_seqs=8, max_model_len=128, num_kvcache_blocks=64, enforce_eager=eager)
        results[eager] = [o["token_ids"] for o in llm.generate(prompts, greedy, use_tqdm=False)]
        replays = [e for e in rec.events if e.event == "CUDAGRAPH_REPLAY"]
        assert bool(replays) != eager, "graphs replayed under enforce_eager, or not at all without it"
        if not eager:
            assert {e.stats["graph_batch_size"] for e in replays} <= {1, 2, 4}
            capture = next(e for e in rec.events if e.event == "CUDAGRAPH_CAPTURE")
            assert capture.stats["batch_sizes"] == [1, 2, 4, 8]
        del llm
    assert results[True] == results[False], (results[True], results[False])
    print("OK")
""")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_graphs_match_eager_on_gpu(tmp_path):
    path = make_random_checkpoint(tmp_path)
    # A fresh process without TRITON_INTERPRET: the kernels must be compiled to be captured.
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    script = tmp_path / "graphs.py"
    script.write_text(GPU_SCRIPT)
    done = subprocess.run([sys.executable, str(script), str(path)], env=env, capture_output=True, text=True,
                          cwd=Path(__file__).parent, timeout=600)
    assert done.returncode == 0 and "OK" in done.stdout, done.stdout + done.stderr


# ---- benchmarks/gpu_check.py: the parts that run without a GPU ------------------------------------


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location(
        "gpu_check", Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules["gpu_check"]


def test_gpu_check_checkpoint_loads_in_both_engines(gpu_check, tmp_path):
    shape = {**gpu_check.QWEN3_0_6B, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128, "vocab_size": 4096}
    path = gpu_check.write_checkpoint(tmp_path / "ckpt", shape, torch.float32)
    config = json.loads((path / "config.json").read_text())
    assert config["vocab_size"] == 4096 and config["tie_word_embeddings"] and config["head_dim"] == 16
    hf = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    prompt = [5, 900, 4000, 17]
    ref = gpu_check.hf_reference(hf, [prompt], 6, eos=-1)
    assert gpu_check.greedy_margins(hf, prompt, ref[0]) == [0.0] * len(ref[0])
    llm = LLM(path, device="cpu", max_model_len=64)
    ours = llm.generate([prompt], SamplingParams(temperature=0.0, max_tokens=6, ignore_eos=True), use_tqdm=False)
    assert ours[0]["token_ids"] == ref[0]


def test_gpu_check_model_is_qwen3_0_6b_shaped(gpu_check):
    shape = gpu_check.QWEN3_0_6B
    assert (shape["hidden_size"], shape["num_hidden_layers"], shape["num_attention_heads"],
            shape["num_key_value_heads"], shape["head_dim"], shape["intermediate_size"],
            shape["vocab_size"], shape["tie_word_embeddings"]) == (1024, 28, 16, 8, 128, 3072, 151936, True)


def test_gpu_check_workloads(gpu_check):
    prompts, max_tokens = gpu_check.make_bench_workload(256, seed=0)
    assert len(prompts) == len(max_tokens) == 256
    assert all(100 <= len(p) <= 1024 for p in prompts) and all(100 <= n <= 1024 for n in max_tokens)
    assert all(0 <= t <= 10000 for p in prompts for t in p)
    assert gpu_check.make_bench_workload(4, seed=1) == gpu_check.make_bench_workload(4, seed=1)

    wave1, wave2 = gpu_check.make_parity_waves(quick=False, seed=0)
    shared = wave1[1][:512]
    assert all(p[:512] == shared for p in wave2)  # two cached 256-token blocks to hit
    assert 256 - 16 < len(wave1[0]) < 256         # decoding crosses the block boundary


def test_gpu_check_variants_and_verdicts(gpu_check):
    every = gpu_check.parity_variants({"torch": None, "triton": None, "flash_attn": None})
    assert ("float32", "torch", False) not in every           # torch is never captured
    assert ("float32", "flash_attn", True) not in every       # flash-attn needs 16-bit
    assert ("bfloat16", "flash_attn", False) in every and ("float32", "triton", False) in every
    assert gpu_check.parity_variants({"torch": None, "triton": "no", "flash_attn": "no"}) == \
        [("float32", "torch", True), ("bfloat16", "torch", True)]
    assert gpu_check.verdict([[1, 2]], [[1, 2]], [[0.0, 0.0]], 1e-3).startswith("PASS identical")
    assert gpu_check.verdict([[1, 3]], [[1, 2]], [[0.0, 1e-4]], 1e-3).startswith("PASS near-ties")
    assert "prompt 0 @ token 1" in gpu_check.verdict([[1, 3]], [[1, 2]], [[0.0, 0.5]], 1e-3)
    assert gpu_check.verdict([[1, 3]], [[1, 2]], [[0.0, 0.5]], 1e-3).startswith("FAIL")
