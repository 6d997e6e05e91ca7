"""Reference solution of ``prepare_prefill``: positions, ``cu_seqlens`` and slots of a prefill batch."""

from __future__ import annotations


def prefill_layout(num_cached_tokens: list[int], num_new_tokens: list[int], block_tables: list[list[int]],
                   block_size: int) -> tuple[list[int], list[int], list[int], list[int]]:
    positions: list[int] = []
    cu_seqlens_q, cu_seqlens_k = [0], [0]
    slot_mapping: list[int] = []
    for start, new, table in zip(num_cached_tokens, num_new_tokens, block_tables):
        end = start + new
        positions.extend(range(start, end))  # absolute: the cached prefix comes first
        cu_seqlens_q.append(cu_seqlens_q[-1] + new)  # queries: only the new tokens
        cu_seqlens_k.append(cu_seqlens_k[-1] + end)  # keys: the cached prefix too
        if table:  # the warm-up's sequences hold no blocks and store nothing
            slot_mapping.extend(table[p // block_size] * block_size + p % block_size for p in range(start, end))
    return positions, cu_seqlens_q, cu_seqlens_k, slot_mapping
