"""Execution layer: Triton attention kernels that read K/V through block tables (paged attention).

Both kernels compute ``softmax(q · kᵀ · scale) · v`` without ever holding a whole row of scores: they walk
the keys in tiles of ``BLOCK_N`` and keep, per query, a running maximum ``m``, a running denominator ``l``
and a running weighted sum ``acc`` ("online softmax", as FlashAttention does). When a new tile raises the
maximum from ``m`` to ``m_new``, everything accumulated so far is rescaled by ``exp(m - m_new)``, so the
result is exactly the softmax over all keys, computed in one pass.

Paging: key position ``p`` of a sequence lives in logical block ``p // block_size`` at offset
``p % block_size``; the sequence's block table maps the logical block to a physical one. A tile of keys
therefore gathers its rows from wherever their blocks happen to sit in the cache.

GQA: query head ``h`` reads K/V head ``h // group``, where ``group = num_heads // num_kv_heads``.

Offsets: a row index times a row stride wraps past 2**31 in int32 and addresses the wrong memory (a cache
of a few GB has more elements than that, and so has a step of 32768 tokens whose rows are 65536 elements
apart). So each program first moves its base pointers in int64 scalar arithmetic (its sequence, its first
query row, each tile's first key row) and then adds tile-local int32 offsets, which stay small; only the
cache rows, gathered from anywhere in the cache, are int64 vectors. (Vectors of int64 offsets cost registers:
made of whole query and key rows, they made the prefill spill on sm_90 even at 8 warps.)

- ``paged_decode_attention``: one query per sequence (decode), one program per (sequence, query head).
- ``prefill_attention``: many queries per sequence (prefill), one program per (sequence, query head,
  tile of ``BLOCK_M`` queries), causal; with a cached prefix the queries are the *last* ``len_q`` of
  ``len_k`` positions and the keys come from the cache through the block table.

Emits no events.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from nanovllm_teach.kernels.store_kvcache import last_dim_contiguous

# Keys per tile in decode: one tile of (32, head_dim) K and V sits comfortably in registers.
DECODE_BLOCK_N = 32
# Warps per prefill program. At Triton's default of 4 the 64x64 bf16 tiles with head_dim 128 need more than
# the 255 registers a thread may have on sm_90 and spill to local memory (40..1000 bytes per thread); 8 warps
# share the tile out and none spills (``benchmarks/gpu/kernel_resources.py`` prints what each variant needs).
PREFILL_NUM_WARPS = 8


@triton.jit
def _paged_decode_kernel(
    q_ptr, k_cache_ptr, v_cache_ptr, out_ptr,
    block_tables_ptr, context_lens_ptr,
    scale, group, block_size,
    stride_q_seq, stride_q_head,
    stride_cache_block, stride_cache_slot, stride_cache_head,
    stride_out_seq, stride_out_head,
    stride_table_seq,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr,
):
    seq = tl.program_id(0).to(tl.int64)  # int64: seq * stride is a scalar offset that may pass 2**31
    head = tl.program_id(1)
    kv_head = head // group  # GQA: `group` consecutive query heads share one K/V head
    table = block_tables_ptr + seq * stride_table_seq  # this sequence's block table

    dims = tl.arange(0, BLOCK_D)  # head_dim padded to a power of two; the padding is masked
    dim_mask = dims < HEAD_DIM
    # All arithmetic in float32, whatever the cache dtype: the softmax sums need the range.
    q = tl.load(q_ptr + seq * stride_q_seq + head * stride_q_head + dims, mask=dim_mask, other=0.0)
    q = q.to(tl.float32)

    # The loop bound is read on the device, so the grid never depends on the lengths: this is what lets a
    # CUDA graph captured once replay for any context lengths.
    context_len = tl.load(context_lens_ptr + seq)
    m_i = tl.full([], float("-inf"), tl.float32)  # running max of the scores
    l_i = tl.full([], 0.0, tl.float32)            # running sum of exp(score - m_i)
    acc = tl.zeros([BLOCK_D], dtype=tl.float32)   # running sum of exp(score - m_i) * v

    for start in range(0, context_len, BLOCK_N):
        pos = start + tl.arange(0, BLOCK_N)  # key positions of this tile, in the sequence's own order
        valid = pos < context_len
        # Logical block -> physical block, one table lookup per key (neighbours usually share a block).
        block = tl.load(table + pos // block_size, mask=valid, other=0)
        rows = (block.to(tl.int64) * stride_cache_block + (pos % block_size) * stride_cache_slot
                + kv_head * stride_cache_head)
        kv_mask = valid[:, None] & dim_mask[None, :]
        k = tl.load(k_cache_ptr + rows[:, None] + dims[None, :], mask=kv_mask, other=0.0).to(tl.float32)
        v = tl.load(v_cache_ptr + rows[:, None] + dims[None, :], mask=kv_mask, other=0.0).to(tl.float32)

        scores = tl.sum(k * q[None, :], axis=1) * scale  # (BLOCK_N,): one dot product per key
        scores = tl.where(valid, scores, float("-inf"))  # exp(-inf) = 0: positions past the end weigh nothing
        m_new = tl.maximum(m_i, tl.max(scores, axis=0))
        rescale = tl.exp(m_i - m_new)                    # 0 on the first tile, where m_i is -inf
        p = tl.exp(scores - m_new)
        l_i = l_i * rescale + tl.sum(p, axis=0)
        acc = acc * rescale + tl.sum(p[:, None] * v, axis=0)
        m_i = m_new

    # l_i >= 1 as soon as there is one key (the maximal score contributes exp(0) = 1). A padding row of a
    # CUDA-graph batch has context_len 0, no keys, l_i = acc = 0: dividing by max(l_i, 1) writes 0, not 0/0.
    out = acc / tl.maximum(l_i, 1.0)
    tl.store(out_ptr + seq * stride_out_seq + head * stride_out_head + dims,
             out.to(out_ptr.dtype.element_ty), mask=dim_mask)


@triton.jit
def _prefill_kernel(
    q_ptr, k_ptr, v_ptr, k_cache_ptr, v_cache_ptr, out_ptr,
    cu_seqlens_q_ptr, cu_seqlens_k_ptr, block_tables_ptr,
    scale, group, block_size,
    stride_q_token, stride_q_head,
    stride_k_token, stride_k_head,
    stride_v_token, stride_v_head,
    stride_cache_block, stride_cache_slot, stride_cache_head,
    stride_out_token, stride_out_head,
    stride_table_seq,
    PAGED: tl.constexpr,  # True: keys come from the cache through block tables (a prefix is cached)
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    DOT_PRECISION: tl.constexpr,
):
    seq = tl.program_id(0)
    head = tl.program_id(1)
    tile = tl.program_id(2)
    kv_head = head // group

    # cu_seqlens: sequence `seq` owns flattened rows [cu[seq], cu[seq + 1]).
    q_start = tl.load(cu_seqlens_q_ptr + seq)
    len_q = tl.load(cu_seqlens_q_ptr + seq + 1) - q_start
    if tile * BLOCK_M >= len_q:
        return  # the grid is sized for the longest sequence; this one has no queries in this tile
    k_start = tl.load(cu_seqlens_k_ptr + seq)
    len_k = tl.load(cu_seqlens_k_ptr + seq + 1) - k_start
    # The queries are the last len_q of len_k positions: the first len_k - len_q are a cached prefix.
    prefix = len_k - len_q

    tile_rows = tl.arange(0, BLOCK_M)
    rows = tile * BLOCK_M + tile_rows  # query index within the sequence
    row_valid = rows < len_q
    q_pos = prefix + rows              # ... and its absolute position
    dims = tl.arange(0, BLOCK_D)
    dim_mask = dims < HEAD_DIM
    # The tile's first query row, as int64 base pointers; the rows within the tile are small offsets.
    first_row = q_start.to(tl.int64) + tile * BLOCK_M
    q_tile = q_ptr + first_row * stride_q_token + head * stride_q_head
    out_tile = out_ptr + first_row * stride_out_token + head * stride_out_head
    table = block_tables_ptr + seq.to(tl.int64) * stride_table_seq
    q = tl.load(q_tile + tile_rows[:, None] * stride_q_token + dims[None, :],
                mask=row_valid[:, None] & dim_mask[None, :], other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    # Causal: no query of this tile sees past its last query's position, so later keys are never loaded.
    # Key 0 is in the first tile and visible to every row, so each row's max is finite from then on.
    k_end = tl.minimum(len_k, prefix + (tile + 1) * BLOCK_M)
    # Without a prefix, a tile of keys is BLOCK_N consecutive rows: the same small offsets from each tile's start.
    tile_keys = tl.arange(0, BLOCK_N)
    k_offsets = tile_keys[:, None] * stride_k_token + kv_head * stride_k_head + dims[None, :]
    v_offsets = tile_keys[:, None] * stride_v_token + kv_head * stride_v_head + dims[None, :]
    for start in range(0, k_end, BLOCK_N):
        k_pos = start + tl.arange(0, BLOCK_N)
        k_valid = k_pos < len_k
        kv_mask = k_valid[:, None] & dim_mask[None, :]
        if PAGED:
            # The new tokens' K/V were stored before this kernel ran, so the cache holds the whole context.
            block = tl.load(table + k_pos // block_size, mask=k_valid, other=0)
            cache_rows = (block.to(tl.int64) * stride_cache_block + (k_pos % block_size) * stride_cache_slot
                          + kv_head * stride_cache_head)
            k = tl.load(k_cache_ptr + cache_rows[:, None] + dims[None, :], mask=kv_mask, other=0.0)
            v = tl.load(v_cache_ptr + cache_rows[:, None] + dims[None, :], mask=kv_mask, other=0.0)
        else:
            # No prefix: keys are this step's rows, at the same flattened positions as the queries.
            first_key = k_start.to(tl.int64) + start
            k = tl.load(k_ptr + first_key * stride_k_token + k_offsets, mask=kv_mask, other=0.0)
            v = tl.load(v_ptr + first_key * stride_v_token + v_offsets, mask=kv_mask, other=0.0)

        scores = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * scale  # (BLOCK_M, BLOCK_N)
        visible = (k_pos[None, :] <= q_pos[:, None]) & k_valid[None, :]
        scores = tl.where(visible, scores, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(scores, axis=1))
        rescale = tl.exp(m_i - m_new)
        p = tl.exp(scores - m_new[:, None])
        l_i = l_i * rescale + tl.sum(p, axis=1)
        # p goes to V's dtype for the second matmul (bf16 on a GPU, as FlashAttention does).
        acc = acc * rescale[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
        m_i = m_new

    out = acc / l_i[:, None]
    tl.store(out_tile + tile_rows[:, None] * stride_out_token + dims[None, :],
             out.to(out_ptr.dtype.element_ty), mask=row_valid[:, None] & dim_mask[None, :])


def _head_block(head_dim: int) -> int:
    # tl.dot needs every dimension to be at least 16 on a GPU.
    return max(16, triton.next_power_of_2(head_dim))


def paged_decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                           block_tables: torch.Tensor, context_lens: torch.Tensor, scale: float) -> torch.Tensor:
    """Decode attention: ``q`` (batch, heads, head_dim), one query per sequence, over the first
    ``context_lens[i]`` keys of sequence ``i`` read through ``block_tables[i]``.

    The grid is (batch, heads) and nothing is read back to the host, so it can be captured in a CUDA graph.
    """
    q = last_dim_contiguous(q)
    batch, num_heads, head_dim = q.shape
    num_kv_heads = k_cache.size(2)
    out = torch.empty_like(q)
    if batch == 0:
        return out
    _paged_decode_kernel[(batch, num_heads)](
        q, k_cache, v_cache, out, block_tables, context_lens,
        scale, num_heads // num_kv_heads, k_cache.size(1),
        q.stride(0), q.stride(1),
        k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
        out.stride(0), out.stride(1),
        block_tables.stride(0),
        HEAD_DIM=head_dim, BLOCK_D=_head_block(head_dim), BLOCK_N=DECODE_BLOCK_N,
    )
    return out


def prefill_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
                      v_cache: torch.Tensor, cu_seqlens_q: torch.Tensor, cu_seqlens_k: torch.Tensor,
                      max_seqlen_q: int, block_tables: torch.Tensor | None, scale: float) -> torch.Tensor:
    """Causal varlen attention: ``q`` (tokens, heads, head_dim) flattened as ``cu_seqlens_q`` says.

    Without ``block_tables`` the keys are ``k``/``v`` (flattened like ``q``); with them, sequence ``i``'s
    keys are its first ``cu_seqlens_k[i+1] - cu_seqlens_k[i]`` cached positions, of which the queries are
    the last ones.
    """
    q, k, v = last_dim_contiguous(q), last_dim_contiguous(k), last_dim_contiguous(v)
    num_tokens, num_heads, head_dim = q.shape
    num_kv_heads = k.size(1)
    num_seqs = cu_seqlens_q.numel() - 1
    out = torch.empty_like(q)
    if num_tokens == 0:
        return out
    # Big tiles for 16-bit inputs; float32 tiles cost twice the registers, so they are half as long.
    block = 64 if q.element_size() <= 2 else 32
    paged = block_tables is not None
    # A dummy pointer when not paged: the PAGED=False kernel never touches it.
    tables = block_tables if paged else cu_seqlens_q
    _prefill_kernel[(num_seqs, num_heads, triton.cdiv(max_seqlen_q, block))](
        q, k, v, k_cache if paged else k, v_cache if paged else v, out,
        cu_seqlens_q, cu_seqlens_k, tables,
        scale, num_heads // num_kv_heads, k_cache.size(1) if paged else 1,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        *(k_cache.stride()[:3] if paged else (0, 0, 0)),
        out.stride(0), out.stride(1),
        tables.stride(0),
        PAGED=paged, HEAD_DIM=head_dim, BLOCK_D=_head_block(head_dim), BLOCK_M=block, BLOCK_N=block,
        # float32 asks for exact float32 products (the GPU default would round inputs to tf32).
        DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",
        num_warps=PREFILL_NUM_WARPS,
    )
    return out
