"""CUDA graphs for decode: the bucket list, the bucket a batch replays, when a step runs eagerly, and how a
replay fills the static buffers (with a stand-in graph, so it runs on CPU). The capture itself needs a GPU:
``test_graphs_match_eager_on_gpu`` runs only where CUDA is available (and ``benchmarks/gpu_check.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

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


def test_cpu_engine_captures_no_graphs(tmp_path):
    rec = TraceRecorder()
    llm = LLM(make_random_checkpoint(tmp_path), trace=rec, device="cpu", max_model_len=64)
    llm.generate([[1, 2, 3]], SamplingParams(temperature=0.0, max_tokens=3), use_tqdm=False)
    assert llm.model_runner.decode_paths.graphs is None
    events = [e.event for e in rec.events]
    assert "CUDAGRAPH_CAPTURE" not in events and "CUDAGRAPH_REPLAY" not in events
    runs = [e for e in rec.events if e.event == "RUN_MODEL"]
    # Decode runs the native step where a compiler exists (tests/test_compiled_decode.py), else eagerly.
    decode_mode = "compiled" if "DECODE_COMPILE" in events else "eager"
    assert {(e.phase, e.stats["mode"]) for e in runs} == {("prefill", "eager"), ("decode", decode_mode)}
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
