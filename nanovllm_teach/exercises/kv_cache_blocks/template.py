"""Exercise ``kv_cache_blocks`` — sizing the KV cache: bytes per block, blocks per budget.

At start-up the model runner (``ModelRunner.allocate_kv_cache``) runs one warm-up (the largest prefill the
limits allow, then sampling ``max_num_seqs`` rows of logits) to see the step's peak memory, then gives the KV cache what is left, as whole blocks. Two functions:

1. ``kv_block_bytes``: one block holds ``block_size`` tokens; for each token, each layer keeps what
   attention needs later of every KV head: a key vector and a value vector of ``head_dim`` numbers, each
   number ``dtype_bytes`` bytes. Example: 2 layers, blocks of 4 tokens, 2 KV heads of dimension 8 in
   2-byte numbers: 512 bytes.
2. ``kv_cache_blocks``: the cache may have the ``utilization`` share of the device's ``total`` memory,
   less what is taken already: everything in use on the device now (``used``), and the extra room a
   forward pass needs on top of what this process holds now (``peak`` is this process at the height of
   the warm-up, ``current`` this process now). That budget is truncated to whole bytes (an int) and, on a
   CPU, whose RAM the rest of the machine shares, capped at ``cpu_cap_bytes`` (None on a GPU: no cap). The
   answer is the number of *whole* blocks that fit; none fit when the budget is negative. Example: total
   1000, utilization 0.5, used 300, peak 150, current 100, blocks of 40 bytes, no cap: 3 blocks.

Write the formulas from the fields (not by calling ``MemoryReading.available`` or ``utils.memory``'s own
helpers). The grader replaces the machine's memory reading with a fixed one, so the numbers are the same
on every machine. Grade it: ``nanovllm-teach grade kv_cache_blocks this_file.py``.
Stuck? ``hint("kv_cache_blocks", 1)`` says where to look, ``hint("kv_cache_blocks", 2)`` how.
"""

from __future__ import annotations

from nanovllm_teach.utils.memory import MemoryReading


def kv_block_bytes(num_layers: int, block_size: int, num_kv_heads: int, head_dim: int, dtype_bytes: int) -> int:
    """Bytes one KV block takes, over all layers."""
    raise NotImplementedError


def kv_cache_blocks(reading: MemoryReading, utilization: float, block_bytes: int,
                    cpu_cap_bytes: int | None) -> int:
    """How many whole blocks of ``block_bytes`` the KV cache gets."""
    raise NotImplementedError
