"""Execution layer: the Triton kernel that writes new K/V rows into the paged KV cache.

The model runner tells every token where its K/V lives with one integer, its *slot*:
``slot = block_id * block_size + offset_in_block``. Seen as a flat array of slots, the cache
``(num_blocks, block_size, kv_heads, head_dim)`` is ``(num_slots, kv_heads, head_dim)``, so the store is
a scatter: row ``t`` of ``k``/``v`` goes to slot ``slot_mapping[t]``. A slot of -1 means "do not write"
(a prefix token that is already cached, or a padding row of a CUDA-graph batch). Emits no events.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from nanovllm_teach.i18n import Text, say

SLOTS_FOR_TOKENS = Text(en="slot_mapping has {slots} entries for {tokens} tokens",
                        zh="slot_mapping 有 {slots} 项，而 token 有 {tokens} 个")
CACHE_LAYOUT = Text(en="the K and V caches must be laid out alike, each contiguous within its layer",
                    zh="K 缓存和 V 缓存的内存布局必须相同，而且在各自的层内连续")


@triton.jit
def _store_kvcache_kernel(
    k_ptr, v_ptr,                  # this step's keys/values: (tokens, kv_heads, head_dim)
    k_cache_ptr, v_cache_ptr,      # the caches: (num_blocks, block_size, kv_heads, head_dim)
    slot_mapping_ptr,              # (tokens,): where each token goes, -1 = skip
    stride_k_token, stride_k_head,
    stride_v_token, stride_v_head,
    stride_cache_slot, stride_cache_head,
    num_kv_heads, head_dim,
    BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr,
):
    # One program per token: it copies that token's (kv_heads, head_dim) tile of K and of V.
    # int64 before multiplying by a stride: token * stride can exceed 2**31 in a large step, and
    # slot * stride in a large GPU cache (int32 products would wrap to a wrong, even negative, address).
    token = tl.program_id(0).to(tl.int64)
    slot = tl.load(slot_mapping_ptr + token).to(tl.int64)
    if slot < 0:
        return  # already cached (or a padding row): nothing to write

    # tl.arange needs a power-of-two length, so the tile is padded and the padding masked off.
    heads = tl.arange(0, BLOCK_H)
    dims = tl.arange(0, BLOCK_D)
    mask = (heads[:, None] < num_kv_heads) & (dims[None, :] < head_dim)

    # The last dimension is contiguous (stride 1), the wrapper guarantees it.
    k = tl.load(k_ptr + token * stride_k_token + heads[:, None] * stride_k_head + dims[None, :], mask=mask)
    v = tl.load(v_ptr + token * stride_v_token + heads[:, None] * stride_v_head + dims[None, :], mask=mask)
    cache_offsets = slot * stride_cache_slot + heads[:, None] * stride_cache_head + dims[None, :]
    tl.store(k_cache_ptr + cache_offsets, k, mask=mask)
    tl.store(v_cache_ptr + cache_offsets, v, mask=mask)


def last_dim_contiguous(x: torch.Tensor) -> torch.Tensor:
    """``x``, copied only if its last dimension is strided: the kernels address it as ``base + dim``."""
    return x if x.stride(-1) == 1 else x.contiguous()


def store_kvcache(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                  slot_mapping: torch.Tensor) -> None:
    """Write ``k``/``v`` (tokens, kv_heads, head_dim) into the cache slots ``slot_mapping`` names.

    Launches a fixed grid (one program per token) and never reads a value back to the host, so it can
    be captured in a CUDA graph.
    """
    k, v = last_dim_contiguous(k), last_dim_contiguous(v)
    num_tokens, num_kv_heads, head_dim = k.shape
    # Checked even though the model runner always passes both right: a notebook calls this with its own
    # tensors, and a wrong one would have the kernel write outside the cache (asserts vanish under python -O).
    if slot_mapping.numel() != num_tokens:
        raise ValueError(say(SLOTS_FOR_TOKENS, slots=slot_mapping.numel(), tokens=num_tokens))
    # Viewing the cache as (slots, kv_heads, head_dim) needs each block's slots to follow the previous
    # block's, which holds for every cache the model runner allocates (a slice of one contiguous tensor).
    if (k_cache.stride(0) != k_cache.size(1) * k_cache.stride(1) or k_cache.stride(-1) != 1
            or v_cache.stride() != k_cache.stride()):
        raise ValueError(say(CACHE_LAYOUT))
    if num_tokens == 0:
        return
    _store_kvcache_kernel[(num_tokens,)](
        k, v, k_cache, v_cache, slot_mapping,
        k.stride(0), k.stride(1), v.stride(0), v.stride(1),
        k_cache.stride(1), k_cache.stride(2),
        num_kv_heads, head_dim,
        BLOCK_H=triton.next_power_of_2(num_kv_heads), BLOCK_D=triton.next_power_of_2(head_dim),
    )
