"""The Triton kernels' launch configuration and their int64 offsets, under the Triton interpreter.

A row index times a row stride passes 2**31 in a large step or cache; in int32 it wraps to a negative
offset and the kernel reads or writes somewhere else (under the interpreter: a segmentation fault). The
kernels move scalar base pointers in int64 and keep only tile-local offsets in int32, so the check puts the
rows 2**31 elements past the tensor's start, with small strides within a tile. The
check runs in a child process so that such a fault fails this test instead of ending the test session. Its
tensors are strided views of one large ``torch.empty``: only the few rows the kernels touch are ever
written, so the gigabytes are address space, not memory.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from nanovllm_teach.kernels import paged_attention

ROOT = Path(__file__).resolve().parents[1]

OFFSETS_SCRIPT = textwrap.dedent("""
    import torch
    from nanovllm_teach.kernels import paged_decode_attention, prefill_attention, store_kvcache

    heads, kv_heads, dim = 4, 2, 16

    def rows(big, n, width, stride, offset=0):  # n rows of `width` heads, `stride` apart; the last 3 random
        view = big.as_strided((n, width, dim), (stride, dim, 1), offset)
        view[-3:].copy_(torch.randn(3, width, dim, dtype=torch.float16))
        return view

    # Store and decode: one program per token or sequence, rows 2**30 elements apart (row 2 at 2**31).
    big = torch.empty(2 * 2**30 + 3 * heads * dim, dtype=torch.float16)
    q, k, v = (rows(big, 3, heads, 2**30), rows(big, 3, kv_heads, 2**30, heads * dim),
               rows(big, 3, kv_heads, 2**30, (heads + kv_heads) * dim))
    compact = [t.contiguous() for t in (q, k, v)]  # the same values at small offsets: the reference

    def caches():
        return [torch.zeros(4, 8, kv_heads, dim, dtype=torch.float16) for _ in range(2)]
    slots = torch.tensor([3, 17, 30])
    (kc, vc), (kc_ref, vc_ref) = caches(), caches()
    store_kvcache(k, v, kc, vc, slots)
    store_kvcache(compact[1], compact[2], kc_ref, vc_ref, slots)
    assert torch.equal(kc, kc_ref) and torch.equal(vc, vc_ref), "store_kvcache"

    tables = torch.tensor([[0, 1, 2, 3]] * 3, dtype=torch.int32)
    lens = torch.tensor([5, 20, 31], dtype=torch.int32)
    out = paged_decode_attention(q, kc, vc, tables, lens, 0.25)
    ref = paged_decode_attention(compact[0], kc, vc, tables, lens, 0.25)
    assert torch.equal(out, ref), "paged_decode_attention"

    # Prefill: a sequence whose 3 tokens are rows 16384.. of a step whose rows are 2**17 apart, so its first
    # row starts at 2**31 (the rows before it are never touched: cu_seqlens starts there).
    big = torch.empty(16387 * 2**17, dtype=torch.float16)
    q, k, v = (rows(big, 16387, heads, 2**17), rows(big, 16387, kv_heads, 2**17, heads * dim),
               rows(big, 16387, kv_heads, 2**17, (heads + kv_heads) * dim))
    cu = torch.tensor([16384, 16387], dtype=torch.int32)
    out = prefill_attention(q, k, v, kc, vc, cu, cu, 3, None, 0.25)[16384:]
    cu0 = torch.tensor([0, 3], dtype=torch.int32)
    ref = prefill_attention(*(t[16384:].contiguous() for t in (q, k, v)), kc, vc, cu0, cu0, 3, None, 0.25)
    assert torch.equal(out, ref), "prefill_attention"
    print("OK")
""")


def test_row_offsets_past_int32_under_the_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", OFFSETS_SCRIPT], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and "OK" in done.stdout, (
        f"exit status {done.returncode} (-11: a segmentation fault, an offset wrapped past int32)\n"
        f"{done.stdout}{done.stderr}")


class RecordingKernel:
    """Stands in for a Triton kernel: ``kernel[grid](...)`` records the launch instead of running it."""

    def __init__(self) -> None:
        self.launches: list[dict] = []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launches.append(dict(grid=grid, **kwargs))


def test_prefill_launches_eight_warps(monkeypatch):
    """4 warps (Triton's default) spill registers on sm_90 with 64x64 bf16 tiles of head_dim 128."""
    kernel = RecordingKernel()
    monkeypatch.setattr(paged_attention, "_prefill_kernel", kernel)
    for dtype in (torch.bfloat16, torch.float32):
        q = torch.zeros(300, 16, 128, dtype=dtype)
        kv = torch.zeros(300, 8, 128, dtype=dtype)
        cu = torch.tensor([0, 100, 300], dtype=torch.int32)
        paged_attention.prefill_attention(q, kv, kv, kv, kv, cu, cu, 200, None, 0.1)
    assert [launch["num_warps"] for launch in kernel.launches] == [8, 8]
    assert [launch["BLOCK_M"] for launch in kernel.launches] == [64, 32]


def test_no_kernel_spills_registers_on_sm90():
    """Compiled for sm_90 (no GPU needed: Triton's wheel brings ptxas and cuobjdump), no kernel variant the
    engine launches needs local memory. A child process: the kernels must be compiled, not interpreted."""
    script = ROOT / "benchmarks" / "gpu" / "kernel_resources.py"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0 and ("cuobjdump" in done.stderr or "ptxas" in done.stderr):
        pytest.skip(f"this Triton cannot compile for sm_90 here: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if "registers" in line]
    assert len(rows) == 8, done.stdout
    assert all(line.split("registers")[1].split()[0] == "0" for line in rows), done.stdout
