"""The cpp attention backend's C++ decode kernel: the attention written out (in float64) for every head
layout, block size and length, the torch backend's result up to rounding, the same bits whatever the batch
or the thread count, and a clear error for what it cannot take; and when ``auto`` picks it."""

from __future__ import annotations

import random

import pytest
import torch

from nanovllm_teach.config import resolve_attention_backend
from nanovllm_teach.i18n import speaking
from nanovllm_teach.layers import attention_cpp
from nanovllm_teach.layers.attention_cpp import MAX_HEAD_DIM, MAX_HEADS, CppAttentionBackend, cpp_unusable_reason
from nanovllm_teach.layers.attention_torch import TorchAttentionBackend
from nanovllm_teach.utils.context import Context
from paged_cache import random_paged_cache

CPU = torch.device("cpu")
UNUSABLE = cpp_unusable_reason(CPU, torch.float32)
pytestmark = pytest.mark.skipif(UNUSABLE is not None, reason=f"the C++ kernel cannot be built here: {UNUSABLE}")


def _paged(lens: list[int], block_size: int, kv_heads: int, head_dim: int, seed: int):
    """A random paged cache (``paged_cache.py``) and the decode Context that reads it."""
    k_cache, v_cache, tables = random_paged_cache(lens, block_size, kv_heads, head_dim, seed)
    ctx = Context(context_lens=torch.tensor(lens, dtype=torch.int32),
                  block_tables=torch.tensor(tables, dtype=torch.int32))
    return k_cache, v_cache, ctx


def _written_out(q, k_cache, v_cache, ctx, scale):
    """softmax(q k^T * scale) v for each sequence and head, in float64, from the rows its table names."""
    outs = []
    for i, length in enumerate(ctx.context_lens.tolist()):
        table = [b for b in ctx.block_tables[i].tolist() if b >= 0]
        k = k_cache[table].flatten(0, 1)[:length].double()
        v = v_cache[table].flatten(0, 1)[:length].double()
        group = q.size(1) // k.size(1)
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        weights = torch.softmax(torch.einsum("hd,lhd->hl", q[i].double(), k) * scale, dim=-1)
        outs.append(torch.einsum("hl,lhd->hd", weights, v))
    return torch.stack(outs).float()


# head_dim a multiple of 16, the widest vector (AVX-512's); 16 and 48 are not whole blocks of the accumulator
# (4 vectors). With 8 K/V heads of 128 a call reads ~14 MB of rows: more than kPrefetchBytes, so the rows are
# asked for ahead.
@pytest.mark.parametrize("block_size", [1, 16, 256])
@pytest.mark.parametrize("heads,kv_heads,head_dim", [(4, 4, 16), (4, 2, 64), (8, 2, 48), (16, 1, 128), (16, 8, 128)])
def test_kernel_is_the_attention_written_out(block_size, heads, kv_heads, head_dim):
    rng = random.Random(block_size * heads + head_dim)
    # Lengths of one, of a whole number of blocks, and past a chunk of scored positions (64).
    lens = [1, block_size, 2 * block_size, 63, 64, 65, 130] + [rng.randint(1, 300) for _ in range(9)]
    k_cache, v_cache, ctx = _paged(lens, block_size, kv_heads, head_dim, seed=len(lens) + block_size)
    q = torch.randn(len(lens), heads, head_dim, generator=torch.Generator().manual_seed(1))
    out = CppAttentionBackend().decode(q, k_cache, v_cache, ctx, head_dim ** -0.5)
    torch.testing.assert_close(out, _written_out(q, k_cache, v_cache, ctx, head_dim ** -0.5), atol=2e-6, rtol=1e-5)
    torch.testing.assert_close(out, TorchAttentionBackend().decode(q, k_cache, v_cache, ctx, head_dim ** -0.5),
                               atol=2e-6, rtol=1e-5)


def test_a_rows_result_depends_on_nothing_else():
    """The same bits for a sequence alone or in a batch, and with one thread or two: each sequence is
    summed by one thread, in position order."""
    lens = [random.Random(3).randint(1, 400) for _ in range(24)]
    k_cache, v_cache, ctx = _paged(lens, 16, 2, 64, seed=5)
    q = torch.randn(len(lens), 4, 64, generator=torch.Generator().manual_seed(2))
    backend = CppAttentionBackend()
    batch = backend.decode(q, k_cache, v_cache, ctx, 0.125)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert torch.equal(backend.decode(q, k_cache, v_cache, ctx, 0.125), batch)
    finally:
        torch.set_num_threads(threads)
    for i in (0, 7, 23):
        alone = Context(context_lens=ctx.context_lens[i:i + 1], block_tables=ctx.block_tables[i:i + 1].contiguous())
        assert torch.equal(backend.decode(q[i:i + 1], k_cache, v_cache, alone, 0.125), batch[i:i + 1])


def test_a_query_that_is_a_strided_view_is_read_right():
    lens = [5, 40, 17]
    k_cache, v_cache, ctx = _paged(lens, 16, 2, 16, seed=1)
    q = torch.randn(4, 16, len(lens)).permute(2, 0, 1)  # (seqs, heads, head_dim), not contiguous
    torch.testing.assert_close(CppAttentionBackend().decode(q, k_cache, v_cache, ctx, 0.25),
                               _written_out(q, k_cache, v_cache, ctx, 0.25), atol=2e-6, rtol=1e-5)


def test_the_largest_head_shapes_it_takes_and_the_first_it_refuses():
    kernel = torch.ops.nanovllm_teach_cpp.paged_decode_attention
    k_cache, v_cache, ctx = _paged([3, 9], 4, 8, MAX_HEAD_DIM, seed=0)
    q = torch.randn(2, MAX_HEADS, MAX_HEAD_DIM)
    torch.testing.assert_close(kernel(q, k_cache, v_cache, ctx.block_tables, ctx.context_lens, 0.1),
                               _written_out(q, k_cache, v_cache, ctx, 0.1), atol=2e-6, rtol=1e-5)
    with pytest.raises(RuntimeError, match=f"up to {MAX_HEADS} query heads.*got {MAX_HEADS + 8}"):
        kernel(torch.randn(2, MAX_HEADS + 8, MAX_HEAD_DIM), k_cache, v_cache, ctx.block_tables, ctx.context_lens, 0.1)
    wide = torch.randn(k_cache.shape[:3] + (MAX_HEAD_DIM + 16,))
    with pytest.raises(RuntimeError, match=f"head_dim up to {MAX_HEAD_DIM}"):
        kernel(torch.randn(2, 8, MAX_HEAD_DIM + 16), wide, wide, ctx.block_tables, ctx.context_lens, 0.1)
    odd = torch.randn(k_cache.shape[:3] + (20,))  # no vector width divides 20
    with pytest.raises(RuntimeError, match="head_dim that is a multiple of .*got 20"):
        kernel(torch.randn(2, 8, 20), odd, odd, ctx.block_tables, ctx.context_lens, 0.1)
    assert "multiple of 16, not 24" in cpp_unusable_reason(CPU, torch.float32, head_dim=24)


def test_inputs_it_cannot_take_are_refused_by_name():
    kernel = torch.ops.nanovllm_teach_cpp.paged_decode_attention
    k_cache, v_cache, ctx = _paged([3, 9], 4, 2, 16, seed=0)
    q = torch.randn(2, 4, 16)
    with pytest.raises(RuntimeError, match="float32"):
        kernel(q.bfloat16(), k_cache.bfloat16(), v_cache.bfloat16(), ctx.block_tables, ctx.context_lens, 0.1)
    with pytest.raises(RuntimeError, match="int32"):
        kernel(q, k_cache, v_cache, ctx.block_tables.long(), ctx.context_lens, 0.1)
    with pytest.raises(RuntimeError, match="context length 13 of sequence 1 does not fit its block table of 3"):
        kernel(q, k_cache, v_cache, ctx.block_tables, torch.tensor([3, 13], dtype=torch.int32), 0.1)


# ---- when it is chosen -------------------------------------------------------------------------


def test_auto_on_a_cpu_picks_it_in_float32_and_torch_otherwise():
    assert resolve_attention_backend("auto", CPU, 256, torch.float32) == "cpp"
    assert resolve_attention_backend("auto", CPU, 256, torch.bfloat16) == "torch"
    with pytest.raises(ValueError, match="attention_backend='cpp' cannot run here: .*float32, not bfloat16"):
        resolve_attention_backend("cpp", CPU, 256, torch.bfloat16)


def test_auto_picks_torch_for_a_model_the_kernel_cannot_hold():
    from transformers import Qwen3Config
    wide = Qwen3Config(hidden_size=64, num_attention_heads=2, num_key_value_heads=1, head_dim=512)
    assert resolve_attention_backend("auto", CPU, 256, torch.float32, wide) == "torch"
    with pytest.raises(ValueError, match="head_dim up to 256, not 512"):
        resolve_attention_backend("cpp", CPU, 256, torch.float32, wide)


def test_without_a_compiler_auto_is_torch_and_the_reason_names_it(monkeypatch, tmp_path):
    monkeypatch.setenv("CXX", "no-such-compiler")
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))  # nothing built there yet
    problem = attention_cpp._load.__wrapped__()  # the build step itself, past the per-process cache
    assert "'no-such-compiler' is not on PATH" in attention_cpp.said(problem)
    monkeypatch.setattr(attention_cpp, "_load", lambda: problem)
    assert resolve_attention_backend("auto", CPU, 256, torch.float32) == "torch"
    with pytest.raises(ValueError, match="cannot run here: no C\\+\\+ compiler found"):
        resolve_attention_backend("cpp", CPU, 256, torch.float32)
    # The outcome is kept for the process; the reason is said in the language asked for when it is shown.
    with speaking("zh"), pytest.raises(ValueError, match="找不到 C\\+\\+ 编译器（PATH 上没有 'no-such-compiler'"):
        resolve_attention_backend("cpp", CPU, 256, torch.float32)


def test_a_killed_build_leaves_nothing_that_stops_the_next_start(tmp_path):
    """A build killed part-way can leave its lock file (the loader waits for it to go) and a half-written
    library: the next start, in a fresh extension cache, removes both and builds. In a subprocess: a
    process holds one copy of the library."""
    script = f"""
import os, time
os.environ["TORCH_EXTENSIONS_DIR"] = {str(tmp_path)!r}
from nanovllm_teach.layers import attention_cpp
folder = attention_cpp._build_folder()
folder.mkdir(parents=True)
(folder / "lock").touch()
old = time.time() - attention_cpp.STALE_LOCK_SECONDS - 1
os.utime(folder / "lock", (old, old))
(folder / (attention_cpp.EXTENSION_NAME + ".so")).write_bytes(b"half a library")
assert attention_cpp._load() is None
import torch
print(torch.ops.nanovllm_teach_cpp.paged_decode_attention)
"""
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "building the C++ decode-attention kernel" in done.stderr
