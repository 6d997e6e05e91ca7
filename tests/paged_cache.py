"""A KV cache of random rows with random block tables, for the attention backends' tests."""

from __future__ import annotations

import random

import torch


def random_paged_cache(lens: list[int], block_size: int, kv_heads: int, head_dim: int, seed: int):
    """K and V caches of random rows, and block tables that give each sequence random (shuffled) blocks,
    -1 past its last one."""
    rng = random.Random(seed)
    needed = [-(-n // block_size) for n in lens]
    num_blocks = sum(needed) + 3
    gen = torch.Generator().manual_seed(seed)
    k_cache = torch.randn(num_blocks, block_size, kv_heads, head_dim, generator=gen)
    v_cache = torch.randn(num_blocks, block_size, kv_heads, head_dim, generator=gen)
    ids = rng.sample(range(num_blocks), sum(needed))
    tables, start = [], 0
    for n in needed:
        tables.append(ids[start:start + n] + [-1] * (max(needed) - n))
        start += n
    return k_cache, v_cache, tables
