"""The model runner's start-up on any machine: which CUDA device it binds, what the warm-up samples and
measures, how the KV cache is sized and reported, and a KV cache that cannot fit."""

from __future__ import annotations

import pytest
import torch

from checkpoints import make_random_checkpoint
from nanovllm_teach import LLM
from nanovllm_teach.engine import model_runner
from nanovllm_teach.engine.model_runner import bind_cuda_device
from nanovllm_teach.layers.sampler import Sampler
from nanovllm_teach.trace import TraceRecorder
from nanovllm_teach.utils import memory


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make_random_checkpoint(tmp_path_factory.mktemp("ckpt"))


def _startup(checkpoint, **settings) -> dict[str, object]:
    rec = TraceRecorder()
    LLM(checkpoint, trace=rec, device="cpu", max_model_len=64, **settings).close()
    return {e.event: e for e in rec.events if e.phase == "init"}


def test_the_rank_device_becomes_the_current_cuda_device(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "set_device", calls.append)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert bind_cuda_device(torch.device("cuda:1"), 0, 1) == torch.device("cuda:1")  # one rank on GPU 1
    assert bind_cuda_device(torch.device("cuda"), 0, 1) == torch.device("cuda:0")
    assert bind_cuda_device(torch.device("cuda"), 1, 2) == torch.device("cuda:1")    # tensor parallelism
    assert bind_cuda_device(torch.device("cpu"), 0, 1) == torch.device("cpu")
    assert calls == [torch.device("cuda:1"), torch.device("cuda:0"), torch.device("cuda:1")]


def test_the_runner_binds_its_device(monkeypatch, checkpoint):
    seen = []
    original = model_runner.bind_cuda_device
    monkeypatch.setattr(model_runner, "bind_cuda_device", lambda *args: seen.append(args) or original(*args))
    _startup(checkpoint)
    assert seen == [(torch.device("cpu"), 0, 1)]


def test_warmup_samples_a_full_decode_batch_at_temperature(monkeypatch, checkpoint):
    """Serving samples up to max_num_seqs rows of the whole vocabulary; the warm-up must see that peak."""
    calls = []
    forward = Sampler.forward

    def spy(self, logits, temperatures, seeds):
        calls.append((tuple(logits.shape), temperatures.tolist()))
        return forward(self, logits, temperatures, seeds)

    monkeypatch.setattr(Sampler, "forward", spy)
    events = _startup(checkpoint, max_num_seqs=48)
    vocab = events["KV_BUDGET_ESTIMATE"].stats["vocab_size"]
    assert ((48, vocab), [1.0] * 48) in calls
    assert events["WARMUP"].stats["sample_rows"] == 48


def test_warmup_peak_is_the_warmups_own(checkpoint):
    """A second engine in one process reports its own peak, not the high-water mark an earlier spike left."""
    first = _startup(checkpoint)["WARMUP"].stats
    spike = bytearray(800 * 2**20)  # touched: resident memory far above what a tiny model's warm-up needs
    del spike
    lifetime_high_water = memory._peak_rss()
    second = _startup(checkpoint)["WARMUP"].stats
    assert first["peak_source"] == second["peak_source"] == "VmHWM after reset"
    assert second["peak_bytes"] < lifetime_high_water - 400 * 2**20


def test_kv_budget_says_what_limited_the_cache(checkpoint):
    capped = _startup(checkpoint, cpu_kvcache_gib=0.01)["KV_BUDGET_ESTIMATE"]
    stats = capped.stats
    assert capped.reason == "size_kv_cache_cpu_cap" and stats["limited_by"] == "cpu_kvcache_gib"
    assert stats["cap_bytes"] == int(0.01 * 2**30)
    assert stats["num_blocks"] == stats["cap_bytes"] // stats["block_bytes"] < stats["uncapped_num_blocks"]
    # The uncapped figure is the memory formula applied to the event's own numbers.
    formula = int(stats["total"] * stats["utilization"] - stats["used"] - stats["peak"] + stats["current"])
    assert stats["uncapped_num_blocks"] == formula // stats["block_bytes"]

    uncapped = _startup(checkpoint, cpu_kvcache_gib=10_000.0)["KV_BUDGET_ESTIMATE"]
    assert uncapped.reason == "size_kv_cache_from_memory" and uncapped.stats["limited_by"] == "memory"
    assert uncapped.stats["num_blocks"] == uncapped.stats["uncapped_num_blocks"]

    explicit = _startup(checkpoint, num_kvcache_blocks=7)["KV_BUDGET_ESTIMATE"]
    assert explicit.stats["limited_by"] == "num_kvcache_blocks" and explicit.stats["num_blocks"] == 7
    assert explicit.stats["graph_reserve_bytes"] is None  # no graphs on a CPU


def test_a_kv_cache_that_cannot_fit_is_refused_before_allocating(monkeypatch, checkpoint):
    zeros = torch.zeros

    def no_huge_allocation(*size, **kwargs):
        assert torch.Size(size).numel() < 2**34, f"allocated {size}"
        return zeros(*size, **kwargs)

    monkeypatch.setattr(torch, "zeros", no_huge_allocation)
    with pytest.raises(ValueError, match=r"num_kvcache_blocks=1000000000 asks for [\d.]+ GiB .* but only "
                                         r"[\d.]+ GiB are left .* at most \d+ blocks fit"):
        _startup(checkpoint, num_kvcache_blocks=10**9)


def test_peak_source_says_when_the_reset_is_refused(monkeypatch):
    cpu = torch.device("cpu")
    real_write = memory.Path.write_text

    def refuse_clear_refs(self, *args, **kwargs):
        if self.name == "clear_refs":
            raise PermissionError("not here")
        return real_write(self, *args, **kwargs)

    monkeypatch.setattr(memory.Path, "write_text", refuse_clear_refs)
    assert memory.reset_peak(cpu) == "VmHWM (process lifetime)"
    monkeypatch.setattr(memory, "_status_field", lambda name: None)  # no /proc: getrusage
    assert memory.reset_peak(cpu) == "ru_maxrss"


def test_graph_memory_is_measured_on_the_largest_bucket_only(monkeypatch):
    """The probe captures the largest bucket alone and yields what it took while it is held."""
    from nanovllm_teach.engine import cuda_graphs
    free = [80, 50]  # free bytes before the probe, then while it is held
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free[0], 100))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    captured = []

    def capture(sizes):
        captured.append(sizes)
        free.pop(0)
        return object()

    with cuda_graphs.largest_graph_held(capture, [1, 2, 4, 8, 16, 32], torch.device("cuda")) as taken:
        assert captured == [[32]] and taken == 30


def test_the_warmup_is_the_largest_step_the_scheduler_forms(checkpoint):
    """A step holds at most max_num_batched_tokens tokens (longer prompts go in chunks): the warm-up runs
    that many when it is less than max_model_len, else as many whole sequences as fit."""
    chunked = _startup(checkpoint, max_num_batched_tokens=48)["WARMUP"].stats  # max_model_len=64
    assert (chunked["num_seqs"], chunked["seq_len"]) == (1, 48)
    whole = _startup(checkpoint, max_num_batched_tokens=256, max_num_seqs=3)["WARMUP"].stats
    assert (whole["num_seqs"], whole["seq_len"]) == (3, 64)
