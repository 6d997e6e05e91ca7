"""Execution layer: where a prefill's tokens sit, as plain lists, before the model runner makes tensors of them.

A prefill computes several sequences' new tokens in one flat row. For attention to tell them apart and to
find each one's cached prefix, the model runner needs, per token, its position in its sequence and the
cache slot its K/V goes to, and per sequence, where its queries and its keys start in the flat row
(``cu_seqlens_q``, ``cu_seqlens_k``: cumulative sums from 0). ``prefill_layout`` computes them from
numbers alone; ``ModelRunner.prepare_prefill`` turns them into tensors. It is the ``prepare_prefill``
exercise's point. Pure Python, no torch.

A prefill's slots come from ``utils.kv_slots.token_slot``, the one copy of the slot formula (a decode
step's, the diagrams' and the decode-cost measurement's come from it too), so that while ``decode_slot`` or
``prepare_prefill`` is graded it raises like their points, and no second copy answers for the learner.

Emits no events (the model runner reports the tensors as PREPARE_PREFILL_TENSORS).
"""

from __future__ import annotations

from nanovllm_teach.utils.kv_slots import token_slot


def prefill_layout(num_cached_tokens: list[int], num_new_tokens: list[int], block_tables: list[list[int]],
                   block_size: int) -> tuple[list[int], list[int], list[int], list[int]]:
    """``(positions, cu_seqlens_q, cu_seqlens_k, slot_mapping)`` of a prefill whose sequence ``i`` has
    ``num_cached_tokens[i]`` tokens cached already and computes the next ``num_new_tokens[i]``, in the
    blocks ``block_tables[i]`` (empty in the warm-up, which stores nothing: no slots)."""
    positions: list[int] = []
    cu_seqlens_q, cu_seqlens_k = [0], [0]
    slot_mapping: list[int] = []
    for start, new, table in zip(num_cached_tokens, num_new_tokens, block_tables, strict=True):
        end = start + new
        positions.extend(range(start, end))
        cu_seqlens_q.append(cu_seqlens_q[-1] + new)
        cu_seqlens_k.append(cu_seqlens_k[-1] + end)  # the keys cover the cached prefix too
        if table:
            slot_mapping.extend(token_slot(table, p, block_size) for p in range(start, end))
    return positions, cu_seqlens_q, cu_seqlens_k, slot_mapping
