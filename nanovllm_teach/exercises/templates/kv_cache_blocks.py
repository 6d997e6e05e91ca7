"""Exercise ``kv_cache_blocks`` — sizing the KV cache: bytes per block, blocks per budget.

At start-up the model runner (``ModelRunner.allocate_kv_cache``; seed 000, 2.5.2) runs one warm-up pass to
see the forward pass's peak memory, then gives the KV cache what is left, as whole blocks. Two formulas:

1. ``kv_block_bytes``: one block holds ``block_size`` tokens; for each token, each layer stores a key
   vector and a value vector of ``head_dim`` numbers per KV head, each number ``dtype_bytes`` bytes.
2. ``kv_cache_blocks``: the budget is ``total * utilization - used - peak + current`` bytes, from the
   ``MemoryReading`` fields (``used``: the whole device now; ``current``: this process now; ``peak``: this
   process at the height of the warm-up, so ``peak - current`` is the room a forward pass needs on top).
   Truncate it to an int first, exactly as ``int(...)`` does. On a CPU, whose RAM the rest of the machine
   shares, the budget is also capped at ``cpu_cap_bytes`` (None on a GPU: no cap). The answer is the
   number of *whole* blocks that fit; nothing fits when the budget is negative.

Write the formulas from the fields (not by calling ``MemoryReading.available`` or ``utils.memory``'s own
helpers). The grader replaces the machine's memory reading with a fixed one, so the numbers are the same
on every machine. Grade it: ``nanovllm-teach grade kv_cache_blocks this_file.py``.
"""

from __future__ import annotations

from nanovllm_teach.utils.memory import MemoryReading


def kv_block_bytes(num_layers: int, block_size: int, num_kv_heads: int, head_dim: int, dtype_bytes: int) -> int:
    """Bytes one KV block takes, over all layers."""
    raise NotImplementedError("count the numbers one block stores: per token, per layer, per KV head, "
                              "a key vector and a value vector of head_dim numbers")


def kv_cache_blocks(reading: MemoryReading, utilization: float, block_bytes: int,
                    cpu_cap_bytes: int | None) -> int:
    """How many whole blocks of ``block_bytes`` the KV cache gets."""
    raise NotImplementedError("budget = int(total * utilization - used - peak + current), capped at "
                              "cpu_cap_bytes when that is not None; then whole blocks, never fewer than 0")
