"""Section ``kernels``: the Triton kernels against the torch backend at production shapes.

head_dim 128, block 256, 16 query heads over 8 KV heads (GQA 2), bf16 and fp32: store (with -1 slots),
decode (with padding rows of context length 0, as a CUDA-graph batch has), prefill without and with a
cached prefix. On a GPU one more case: a cache of more than 2**31 elements per layer view, whose blocks at
its top end are written and read (their offsets need int64). The CPU stand-in runs small shapes under the
Triton interpreter, fp32 only (the interpreter's bf16 ``tl.dot`` is not exact on a CPU).
"""

from __future__ import annotations

import random

import torch

from common import Setup, verdict
from nanovllm_teach import kernels
from nanovllm_teach.layers.attention_torch import TorchAttentionBackend
from nanovllm_teach.utils.context import Context

REF = TorchAttentionBackend()
TOLERANCE = {torch.float32: 2e-5, torch.bfloat16: 2e-2}


def compare(name: str, ours: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype, failures: list[str]) -> None:
    err = (ours.float() - ref.float()).abs().max().item() if ours.numel() else 0.0
    ok = err <= TOLERANCE[dtype] * max(1.0, ref.float().abs().max().item())
    print(f"  {name:<44} max |diff| {err:.2e}  {'ok' if ok else 'MISMATCH'}")
    if not ok:
        failures.append(name)


def check_layout(dtype: torch.dtype, device: str, num_blocks: int, lengths: list[int], cached: list[int],
                 top_end: bool, heads: int, kv_heads: int, dim: int, block: int, failures: list[str],
                 tag: str) -> None:
    """One paged layout: sequences of ``lengths`` tokens, the first ``cached`` of each already in the cache."""
    rng = random.Random(len(lengths) * 7 + num_blocks)
    needed = [-(-n // block) for n in lengths]
    pool = list(range(num_blocks - sum(needed), num_blocks)) if top_end else rng.sample(range(num_blocks), sum(needed))
    rng.shuffle(pool)
    tables, start = [], 0
    for n in needed:
        tables.append(pool[start:start + n] + [-1] * (max(needed) - n))
        start += n
    block_tables = torch.tensor(tables, dtype=torch.int32, device=device)
    k_cache = torch.zeros(num_blocks, block, kv_heads, dim, dtype=dtype, device=device)
    v_cache = torch.zeros_like(k_cache)
    # Only the blocks in use get random contents: the big cache stays cheap to fill.
    used = torch.tensor(pool, device=device, dtype=torch.long)
    k_cache[used] = torch.randn(len(pool), block, kv_heads, dim, device=device).to(dtype)
    v_cache[used] = torch.randn(len(pool), block, kv_heads, dim, device=device).to(dtype)

    def slot(seq: int, pos: int) -> int:
        return tables[seq][pos // block] * block + pos % block

    # Store: this step's new tokens (positions cached..length), with a few -1 slots that must not be written.
    new = [(i, p) for i, n in enumerate(lengths) for p in range(cached[i], n)]
    slots = torch.tensor([slot(i, p) for i, p in new], device=device)
    skip = torch.zeros(len(new), dtype=torch.bool, device=device)
    skip[::97] = True
    slots = torch.where(skip, -1, slots)
    k_new = torch.randn(len(new), kv_heads, dim, device=device).to(dtype)
    v_new = torch.randn(len(new), kv_heads, dim, device=device).to(dtype)
    ref_k_cache, ref_v_cache = k_cache.clone(), v_cache.clone()
    REF.store_kvcache(k_new, v_new, ref_k_cache, ref_v_cache, slots)
    kernels.store_kvcache(k_new, v_new, k_cache, v_cache, slots)
    compare(f"{tag} store", k_cache[used], ref_k_cache[used], dtype, failures)
    compare(f"{tag} store (V)", v_cache[used], ref_v_cache[used], dtype, failures)
    del ref_k_cache, ref_v_cache
    scale = dim ** -0.5

    # Decode: one query per sequence over its whole context; two padding rows with context length 0.
    q = torch.randn(len(lengths) + 2, heads, dim, device=device).to(dtype)
    lens = torch.tensor(lengths + [0, 0], dtype=torch.int32, device=device)
    pad_tables = torch.cat([block_tables, torch.zeros(2, block_tables.size(1), dtype=torch.int32, device=device)])
    ctx = Context(is_prefill=False, context_lens=lens[:len(lengths)], block_tables=block_tables)
    ours = kernels.paged_decode_attention(q, k_cache, v_cache, pad_tables, lens, scale)
    compare(f"{tag} decode", ours[:len(lengths)], REF.decode(q[:len(lengths)], k_cache, v_cache, ctx, scale),
            dtype, failures)
    compare(f"{tag} decode padding rows are 0", ours[len(lengths):], torch.zeros_like(ours[len(lengths):]),
            dtype, failures)

    # Prefill with a cached prefix: the queries are the new tokens, the keys the whole context from the cache.
    len_q = [n - c for n, c in zip(lengths, cached)]
    cu_q = torch.tensor([0] + list(torch.tensor(len_q).cumsum(0).tolist()), dtype=torch.int32, device=device)
    cu_k = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0).tolist()), dtype=torch.int32, device=device)
    qp = torch.randn(sum(len_q), heads, dim, device=device).to(dtype)
    ctx = Context(is_prefill=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(len_q),
                  max_seqlen_k=max(lengths), block_tables=block_tables)
    ours = kernels.prefill_attention(qp, k_new, v_new, k_cache, v_cache, cu_q, cu_k, max(len_q), block_tables, scale)
    compare(f"{tag} prefill, cached prefix", ours, REF.prefill(qp, k_new, v_new, k_cache, v_cache, ctx, scale),
            dtype, failures)


def check_prefill_no_prefix(dtype: torch.dtype, device: str, lengths: list[int], heads: int, kv_heads: int,
                            dim: int, failures: list[str], tag: str) -> None:
    cu = torch.tensor([0] + torch.tensor(lengths).cumsum(0).tolist(), dtype=torch.int32, device=device)
    q = torch.randn(sum(lengths), heads, dim, device=device).to(dtype)
    k = torch.randn(sum(lengths), kv_heads, dim, device=device).to(dtype)
    v = torch.randn(sum(lengths), kv_heads, dim, device=device).to(dtype)
    empty = torch.tensor([], device=device, dtype=dtype)
    ctx = Context(is_prefill=True, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max(lengths),
                  max_seqlen_k=max(lengths))
    ours = kernels.prefill_attention(q, k, v, empty, empty, cu, cu, max(lengths), None, dim ** -0.5)
    compare(f"{tag} prefill, no prefix", ours, REF.prefill(q, k, v, empty, empty, ctx, dim ** -0.5), dtype, failures)


def run_kernels(setup: Setup) -> str:
    torch.manual_seed(0)
    failures: list[str] = []
    if setup.gpu:
        heads, kv_heads, dim, block = 16, 8, 128, 256
        lengths, cached = [1, 255, 256, 257, 700, 2049], [0, 0, 256, 256, 512, 1024]
        cases = [(dtype, 64) for dtype in (torch.float32, torch.bfloat16)]
        # > 2**31 elements: 8200 blocks x 256 slots x 8 heads x 128 dims = 2.15e9 (4.3 GB in bf16, per cache).
        big_blocks = 8200
        assert big_blocks * block * kv_heads * dim > 2**31
    else:
        heads, kv_heads, dim, block = 4, 2, 16, 8
        lengths, cached = [1, 7, 8, 9, 20], [0, 0, 8, 8, 16]
        cases, big_blocks = [(torch.float32, 16)], None
    for dtype, num_blocks in cases:
        tag = f"{str(dtype).removeprefix('torch.'):<8}"
        print(f"{tag} heads {heads}/{kv_heads}, head_dim {dim}, block {block}, {num_blocks} blocks, "
              f"lengths {lengths}, cached {cached}")
        check_layout(dtype, setup.device, num_blocks, lengths, cached, False, heads, kv_heads, dim, block,
                     failures, tag)
        check_prefill_no_prefix(dtype, setup.device, lengths, heads, kv_heads, dim, failures, tag)
    if big_blocks is not None:
        tag = "bf16 big"
        print(f"{tag}: {big_blocks} blocks, {big_blocks * block * kv_heads * dim:,} elements per cache "
              f"(> 2**31 = {2**31:,}), the sequences' blocks at its top end")
        check_layout(torch.bfloat16, setup.device, big_blocks, lengths, cached, True, heads, kv_heads, dim, block,
                     failures, tag)
    else:
        print("the > 2**31-element cache needs a GPU (tests/test_kernel_offsets.py covers the offsets on a CPU)")
    if failures:
        return verdict("FAIL", f"{len(failures)} mismatches: {', '.join(failures)}")
    return verdict("PASS", "store, decode, prefill (with and without a cached prefix) match the torch backend"
                   + (" in fp32 and bf16, also in a > 2**31-element cache" if setup.gpu else " (CPU stand-in, fp32)"))
