"""The CPU KV cap sized from the machine and the model (utils/memory.py's ``auto_cpu_kv_cap``): a real
checkpoint's shape gets the blocks a share of memory buys, a tiny model no more than its limits can fill, the
reason is in KV_BUDGET_ESTIMATE, and the cache's pages cost memory only once written."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen3Config

from nanovllm_teach import LLM, default_model_path
from nanovllm_teach.config import Config
from nanovllm_teach.settings import Settings
from nanovllm_teach.trace import TraceRecorder
from nanovllm_teach.utils import memory
from nanovllm_teach.utils.memory import CPU_KV_SHARE, auto_cpu_kv_cap, zeros_committed_on_write

GIB = 2**30
# Qwen3-0.6B's shape (its config.json), without weights: Config never reads them.
QWEN3_06B = dict(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                 num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
                 tie_word_embeddings=True)


def _config(tmp_path, available: int | None, **settings) -> Config:
    hf = Qwen3Config(**QWEN3_06B)
    hf.save_pretrained(tmp_path)
    return Config.build(Settings(**settings), tmp_path, hf, device="cpu", dtype="float32", on_gpu=False,
                        attention_backend="torch", linear_backend="torch", available_memory=available)


def test_the_cap_is_a_share_of_memory_or_what_the_limits_fill():
    assert auto_cpu_kv_cap(10, 1000, available=1000) == (int(1000 * CPU_KV_SHARE),
                                                         f"{CPU_KV_SHARE:g} of the 0.0 GiB available at start-up")
    cap, why = auto_cpu_kv_cap(10, 5, available=1000)
    assert cap == 50 and why.startswith("what the limits can fill: 5 blocks")
    assert auto_cpu_kv_cap(10, 5, available=None)[0] == 50  # a simulated device: the limits only


def test_a_real_checkpoint_gets_dozens_of_blocks_not_four(tmp_path):
    block_bytes = 2 * 28 * 256 * 8 * 128 * 4  # 58.7 MB for 256 tokens
    config = _config(tmp_path, available=16 * GIB)
    assert config.cpu_kvcache_gib == pytest.approx(16 * CPU_KV_SHARE)
    assert int(config.cpu_kvcache_gib * GIB) // block_bytes == 73  # was 4 under the fixed 0.25 GiB
    assert config.requested.cpu_kvcache_gib is None and config.resolved_from()["cpu_kvcache_gib"] is None
    assert "available at start-up" in config.cpu_kv_cap_reason
    # Limits smaller than the share: the cap is what they can fill (2 sequences of 512 tokens, 4 blocks).
    small = _config(tmp_path, available=16 * GIB, max_num_seqs=2, max_model_len=512)
    assert int(small.cpu_kvcache_gib * GIB) == 4 * block_bytes and "limits" in small.cpu_kv_cap_reason
    # Set explicitly, it is kept as it is.
    assert _config(tmp_path, available=16 * GIB, cpu_kvcache_gib=0.25).cpu_kvcache_gib == 0.25


def test_the_engine_reports_the_cap_and_its_reason():
    rec = TraceRecorder()
    with LLM(default_model_path(), trace=rec, max_num_seqs=8, max_model_len=512):
        pass
    kv = next(e for e in rec.events if e.event == "KV_BUDGET_ESTIMATE")
    # The shipped model is tiny: the limits (8 sequences of 512 tokens, 2 blocks each) decide, not memory.
    assert kv.reason == "size_kv_cache_cpu_cap" and kv.stats["limited_by"] == "cpu_kvcache_gib"
    assert kv.stats["num_blocks"] == 16 and "limits" in kv.stats["cap_reason"]


def test_the_cache_costs_memory_only_where_written():
    before = memory._current_rss()
    cache = zeros_committed_on_write((64, 2**20), torch.float32)  # 256 MiB
    assert cache.shape == (64, 2**20) and not cache[::7, ::4099].any()
    assert memory._current_rss() - before < 32 * 2**20
    cache[3].fill_(1.5)  # one row written: 4 MiB committed
    assert cache[3].sum().item() == 1.5 * 2**20 and memory._current_rss() - before < 40 * 2**20
