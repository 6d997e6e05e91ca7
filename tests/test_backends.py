"""Attention backends: how one is chosen (``auto`` and explicit names, with errors that name the problem),
the flash-attn backend's calls, and the whole engine giving identical greedy tokens with the torch and the
Triton backend (the Triton kernels run on CPU in the interpreter)."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from checkpoints import make_random_checkpoint
from nanovllm_teach import LLM, SamplingParams
from nanovllm_teach import config as config_module
from nanovllm_teach.config import resolve_attention_backend
from nanovllm_teach.layers.attention import make_attention_backend
from nanovllm_teach.trace import TraceRecorder
from nanovllm_teach.utils.context import Context

CPU, CUDA = torch.device("cpu"), torch.device("cuda")


def _has_flash_attn() -> bool:
    try:
        import flash_attn  # noqa: F401
    except ImportError:
        return False
    return True


# ---- choosing a backend ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["torch", "cpp", "triton"])
def test_make_attention_backend(name):
    assert make_attention_backend(name).name == name


def test_unknown_backend_is_named():
    with pytest.raises(ValueError, match="'cuda_magic'.*torch, cpp, triton, flash_attn"):
        make_attention_backend("cuda_magic")


def test_auto_on_cpu_is_cpp_and_torch_stays_torch():
    """(When the C++ kernel cannot be built, auto is torch: tests/test_attention_cpp.py.)"""
    assert resolve_attention_backend("auto", CPU, 16, torch.float32) == "cpp"
    assert resolve_attention_backend("torch", CPU) == "torch"


def test_triton_on_cpu_needs_the_interpreter(monkeypatch):
    assert resolve_attention_backend("triton", CPU) == "triton"
    from nanovllm_teach import kernels
    monkeypatch.setattr(kernels, "INTERPRETED", False)
    with pytest.raises(ValueError, match="TRITON_INTERPRET=1"):
        resolve_attention_backend("triton", CPU)


def test_interpreter_switched_on_too_late_is_named(monkeypatch):
    from nanovllm_teach import kernels
    monkeypatch.setattr(kernels, "TRITON_HELPERS_INTERPRETED", not kernels.INTERPRETED)
    for device in (CPU, torch.device("cuda")):
        with pytest.raises(ValueError, match="changed after triton was imported"):
            resolve_attention_backend("triton", device)


@pytest.mark.skipif(_has_flash_attn(), reason="flash_attn is installed here")
def test_flash_attn_missing_is_named():
    with pytest.raises(ValueError, match=r"flash_attn.*not importable.*nanovllm_teach\[gpu\]"):
        resolve_attention_backend("flash_attn", CPU)
    with pytest.raises(ImportError, match=r"nanovllm_teach\[gpu\]"):
        make_attention_backend("flash_attn")


def test_auto_on_cuda_prefers_flash_attn_then_triton(monkeypatch):
    # Decided from availability alone, so it can be checked on a machine without a GPU.
    monkeypatch.setattr(config_module, "flash_attn_unusable_reason", lambda *args: None)
    assert resolve_attention_backend("auto", CUDA) == "flash_attn"
    monkeypatch.setattr(config_module, "flash_attn_unusable_reason", lambda *args: "not installed")
    assert resolve_attention_backend("auto", CUDA) == "triton"
    monkeypatch.setattr(config_module, "triton_unusable_reason", lambda *args: "not installed")
    assert resolve_attention_backend("auto", CUDA) == "torch"


def test_flash_attn_limits_are_named(monkeypatch):
    from nanovllm_teach.layers import attention_flash
    monkeypatch.setitem(sys.modules, "flash_attn", types.ModuleType("flash_attn"))
    assert attention_flash.flash_attn_unusable_reason(CUDA, 256, torch.bfloat16) is None
    assert "multiple of 256" in attention_flash.flash_attn_unusable_reason(CUDA, 16, torch.bfloat16)
    assert "float16 or bfloat16" in attention_flash.flash_attn_unusable_reason(CUDA, 256, torch.float32)
    assert "CUDA" in attention_flash.flash_attn_unusable_reason(CPU, 256, torch.bfloat16)


def test_engine_rejects_an_unusable_backend(tmp_path):
    path = make_random_checkpoint(tmp_path)
    with pytest.raises(ValueError, match="attention_backend='flash_attn' cannot run here"):
        LLM(path, attention_backend="flash_attn", device="cpu")


# ---- the flash-attn backend's calls, against a stand-in module -----------------------------------


def test_flash_attn_backend_calls(monkeypatch):
    calls = {}

    def varlen(q, k, v, **kw):
        calls["varlen"] = (k, kw)
        return q

    def with_kvcache(q, k_cache, v_cache, **kw):
        calls["kvcache"] = (q.shape, kw)
        return q

    fake = types.ModuleType("flash_attn")
    fake.flash_attn_varlen_func, fake.flash_attn_with_kvcache = varlen, with_kvcache
    monkeypatch.setitem(sys.modules, "flash_attn", fake)
    backend = make_attention_backend("flash_attn")
    q, k = torch.randn(5, 4, 16), torch.randn(5, 2, 16)
    k_cache = torch.zeros(3, 256, 2, 16)
    cu = torch.tensor([0, 5], dtype=torch.int32)
    tables = torch.tensor([[2]], dtype=torch.int32)

    fresh = Context(is_prefill=True, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=5, max_seqlen_k=5)
    backend.prefill(q, k, k, k_cache, k_cache, fresh, 0.25)
    assert calls["varlen"][0] is k and calls["varlen"][1]["block_table"] is None
    assert calls["varlen"][1]["causal"] and calls["varlen"][1]["softmax_scale"] == 0.25

    cached = Context(is_prefill=True, cu_seqlens_q=cu, cu_seqlens_k=cu + 3, max_seqlen_q=5, max_seqlen_k=8,
                     block_tables=tables)
    backend.prefill(q, k, k, k_cache, k_cache, cached, 0.25)
    assert calls["varlen"][0] is k_cache and calls["varlen"][1]["block_table"] is tables

    decode = Context(context_lens=torch.tensor([9], dtype=torch.int32), block_tables=tables)
    out = backend.decode(q[:1], k_cache, k_cache, decode, 0.25)
    shape, kw = calls["kvcache"]
    assert shape == (1, 1, 4, 16) and out.shape == (1, 4, 16)
    assert kw["cache_seqlens"] is decode.context_lens and kw["block_table"] is tables


# ---- the whole engine: torch and triton give the same greedy tokens ------------------------------


def _run(path, backend: str) -> tuple[list[list[int]], TraceRecorder]:
    rec = TraceRecorder()
    llm = LLM(path, trace=rec, device="cpu", attention_backend=backend, kvcache_block_size=16,
              max_model_len=64, max_num_batched_tokens=64)
    shared = list(range(40, 60))  # 20 tokens: the first 16 fill a block the second wave finds cached
    greedy = SamplingParams(temperature=0.0, max_tokens=8)
    # Wave 1: a 12-token prompt decodes across its block boundary (12 + 8 > 16).
    outs = llm.generate([shared + [7, 8, 9], list(range(100, 112))], greedy, use_tqdm=False)
    # Wave 2: a prefix-cache hit, so prefill reads the cached block back through the block table.
    outs += llm.generate([shared + [3, 1, 4, 1, 5]], greedy, use_tqdm=False)
    return [out["token_ids"] for out in outs], rec


def test_engine_greedy_tokens_identical_torch_vs_triton(tmp_path):
    path = make_random_checkpoint(tmp_path, seed=5)
    expected, _ = _run(path, "torch")
    got, rec = _run(path, "triton")
    assert got == expected
    assert rec.header["config"]["attention_backend"] == "triton"
    names = [(e.event, e.reason) for e in rec.events]
    assert ("PREFIX_CACHE_HIT", "prefix_blocks_reused") in names
    assert ("BLOCK_ALLOCATE", "decode_needs_new_block") in names
    ready = next(e for e in rec.events if e.event == "ENGINE_READY")
    assert ready.stats["attention_backend"] == "triton"
