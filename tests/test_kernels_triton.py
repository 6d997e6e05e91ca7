"""The Triton kernels agree with the torch backend on random paged layouts, run on CPU by the Triton
interpreter: GQA ratios 1/2/4, block sizes 1/4/16, ragged lengths, -1 slots and -1 block-table padding."""

from __future__ import annotations

import random

import pytest
import torch

from nanovllm_teach import kernels
from nanovllm_teach.layers.attention_torch import TorchAttentionBackend
from nanovllm_teach.utils.context import Context

REF = TorchAttentionBackend()
NUM_KV_HEADS = 2
HEAD_DIM = 16
SCALE = HEAD_DIM ** -0.5
TOL = dict(rtol=1e-5, atol=1e-5)


def test_kernels_run_in_the_interpreter():
    assert kernels.INTERPRETED


class PagedLayout:
    """Random caches (garbage everywhere, so a wrong read shows) and a shuffled block table per sequence."""

    def __init__(self, lengths: list[int], block_size: int, seed: int, head_dim: int = HEAD_DIM) -> None:
        gen = torch.Generator().manual_seed(seed)
        needed = [-(-n // block_size) for n in lengths]
        num_blocks = sum(needed) + 3  # spare blocks nobody owns
        self.k_cache = torch.randn(num_blocks, block_size, NUM_KV_HEADS, head_dim, generator=gen)
        self.v_cache = torch.randn(num_blocks, block_size, NUM_KV_HEADS, head_dim, generator=gen)
        order = random.Random(seed).sample(range(num_blocks), sum(needed))
        width = max(needed)
        tables, start = [], 0
        for n in needed:
            tables.append(order[start:start + n] + [-1] * (width - n))  # -1 pads short tables
            start += n
        self.block_tables = torch.tensor(tables, dtype=torch.int32)
        self.block_size = block_size

    def slot(self, seq: int, pos: int) -> int:
        return int(self.block_tables[seq, pos // self.block_size]) * self.block_size + pos % self.block_size


@pytest.mark.parametrize("block_size,head_dim", [(1, 16), (4, 24), (16, 8)])
def test_store_kvcache_matches_torch(block_size, head_dim):
    lengths = [3, 9, 1]
    layout = PagedLayout(lengths, block_size, seed=block_size, head_dim=head_dim)
    slots = [layout.slot(i, p) for i, n in enumerate(lengths) for p in range(n)]
    for skipped in (0, 4, len(slots) - 1):  # already-cached tokens are not written
        slots[skipped] = -1
    slot_mapping = torch.tensor(slots)
    k = torch.randn(len(slots), NUM_KV_HEADS, head_dim)
    v = torch.randn(len(slots), NUM_KV_HEADS, head_dim)
    k_ref, v_ref = layout.k_cache.clone(), layout.v_cache.clone()
    REF.store_kvcache(k, v, k_ref, v_ref, slot_mapping)
    kernels.store_kvcache(k, v, layout.k_cache, layout.v_cache, slot_mapping)
    assert torch.equal(layout.k_cache, k_ref) and torch.equal(layout.v_cache, v_ref)


def test_store_kvcache_reads_strided_rows():
    # The model hands over views (k and v split from one fused projection): rows are not contiguous.
    layout = PagedLayout([5], 4, seed=0)
    kv = torch.randn(5, 2, NUM_KV_HEADS, HEAD_DIM)
    k, v = kv[:, 0], kv[:, 1]
    slot_mapping = torch.tensor([layout.slot(0, p) for p in range(5)])
    k_ref, v_ref = layout.k_cache.clone(), layout.v_cache.clone()
    REF.store_kvcache(k, v, k_ref, v_ref, slot_mapping)
    kernels.store_kvcache(k, v, layout.k_cache, layout.v_cache, slot_mapping)
    assert torch.equal(layout.k_cache, k_ref) and torch.equal(layout.v_cache, v_ref)


@pytest.mark.parametrize("group", [1, 2, 4])
@pytest.mark.parametrize("block_size", [1, 4, 16])
def test_paged_decode_matches_torch(group, block_size):
    lengths = [1, 7, 40]  # one key, a partial block, several tiles of keys
    layout = PagedLayout(lengths, block_size, seed=10 * group + block_size)
    q = torch.randn(len(lengths), NUM_KV_HEADS * group, HEAD_DIM)
    ctx = Context(context_lens=torch.tensor(lengths, dtype=torch.int32), block_tables=layout.block_tables)
    expected = REF.decode(q, layout.k_cache, layout.v_cache, ctx, SCALE)
    got = kernels.paged_decode_attention(q, layout.k_cache, layout.v_cache, ctx.block_tables, ctx.context_lens,
                                         SCALE)
    torch.testing.assert_close(got, expected, **TOL)


def test_paged_decode_padding_row_is_zero():
    # A CUDA-graph batch pads with rows of context length 0: they must come out finite (zeros).
    layout = PagedLayout([6, 1], 4, seed=1)
    q = torch.randn(2, NUM_KV_HEADS, HEAD_DIM)
    out = kernels.paged_decode_attention(q, layout.k_cache, layout.v_cache, layout.block_tables,
                                         torch.tensor([6, 0], dtype=torch.int32), SCALE)
    assert torch.equal(out[1], torch.zeros_like(out[1]))
    assert out[0].isfinite().all()


def _cu(lengths: list[int]) -> torch.Tensor:
    return torch.tensor([0] + torch.tensor(lengths).cumsum(0).tolist(), dtype=torch.int32)


@pytest.mark.parametrize("group", [1, 2, 4])
def test_prefill_without_cache_matches_torch(group):
    lengths = [1, 5, 37]  # 37 > one 32-query tile: a second tile, and a ragged one
    total = sum(lengths)
    q = torch.randn(total, NUM_KV_HEADS * group, HEAD_DIM)
    k = torch.randn(total, NUM_KV_HEADS, HEAD_DIM)
    v = torch.randn(total, NUM_KV_HEADS, HEAD_DIM)
    cu = _cu(lengths)
    ctx = Context(is_prefill=True, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=max(lengths),
                  max_seqlen_k=max(lengths))
    empty = torch.tensor([])
    expected = REF.prefill(q, k, v, empty, empty, ctx, SCALE)
    got = kernels.prefill_attention(q, k, v, empty, empty, cu, cu, max(lengths), None, SCALE)
    torch.testing.assert_close(got, expected, **TOL)


@pytest.mark.parametrize("group,block_size", [(1, 1), (2, 4), (4, 16), (2, 16)])
def test_prefill_with_cached_prefix_matches_torch(group, block_size):
    # (cached prefix, new tokens) per sequence; the second has no prefix but is read through its table too.
    shapes = [(16, 3), (0, 6), (5, 35)]
    k_lens = [c + n for c, n in shapes]
    q_lens = [n for _, n in shapes]
    layout = PagedLayout(k_lens, block_size, seed=group * 100 + block_size)
    q = torch.randn(sum(q_lens), NUM_KV_HEADS * group, HEAD_DIM)
    k = torch.randn(sum(q_lens), NUM_KV_HEADS, HEAD_DIM)
    v = torch.randn(sum(q_lens), NUM_KV_HEADS, HEAD_DIM)
    # As in the engine: the new tokens are stored first, then attention reads the whole context back.
    slots = torch.tensor([layout.slot(i, p) for i, (c, n) in enumerate(shapes) for p in range(c, c + n)])
    REF.store_kvcache(k, v, layout.k_cache, layout.v_cache, slots)
    cu_q, cu_k = _cu(q_lens), _cu(k_lens)
    ctx = Context(is_prefill=True, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(q_lens),
                  max_seqlen_k=max(k_lens), block_tables=layout.block_tables)
    expected = REF.prefill(q, k, v, layout.k_cache, layout.v_cache, ctx, SCALE)
    got = kernels.prefill_attention(q, k, v, layout.k_cache, layout.v_cache, cu_q, cu_k, max(q_lens),
                                    layout.block_tables, SCALE)
    torch.testing.assert_close(got, expected, **TOL)


def test_store_kvcache_refuses_what_would_write_outside_the_cache():
    """A notebook calls the kernel with its own tensors: a slot mapping of the wrong length, or a cache not
    laid out as one block after another, is refused before the kernel runs (under python -O too)."""
    from nanovllm_teach.i18n import speaking

    k = v = torch.zeros(3, 2, HEAD_DIM)
    k_cache, v_cache = torch.zeros(4, 8, 2, HEAD_DIM), torch.zeros(4, 8, 2, HEAD_DIM)
    with pytest.raises(ValueError, match="slot_mapping has 2 entries for 3 tokens"):
        kernels.store_kvcache(k, v, k_cache, v_cache, torch.tensor([0, 1]))
    with speaking("zh"), pytest.raises(ValueError, match="K 缓存和 V 缓存的内存布局必须相同"):
        kernels.store_kvcache(k, v, k_cache, v_cache.transpose(0, 1), torch.tensor([0, 1, 2]))
    assert not k_cache.any() and not v_cache.any()
