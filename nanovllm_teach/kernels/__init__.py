"""Execution layer: the Triton kernels behind the ``triton`` attention backend.

- ``store_kvcache``: write this step's new K/V rows into their cache slots (one program per token).
- ``paged_decode_attention``: one query per sequence against all its cached keys, read through the
  block table (one program per sequence and query head, online softmax over tiles of keys).
- ``prefill_attention``: causal attention over a flattened batch of variable-length sequences, with the
  keys either this step's K/V or, when a prefix is cached, the whole context read back from the cache.

Each kernel has a plain-PyTorch twin in ``layers/attention_torch.py``; the tests check they agree. On a
machine without a GPU the kernels run under the Triton interpreter: set ``TRITON_INTERPRET=1`` in the
environment *before* starting Python. Triton decides interpreted-or-compiled once per function, when it
decorates it: its own helpers (``tl.zeros``, ...) when triton is first imported, which importing torch
already does, and these kernels when this package is imported. Importing this package needs ``triton``;
nothing here emits events.
"""

from __future__ import annotations

import triton.language as tl
from triton.runtime.interpreter import InterpretedFunction

from nanovllm_teach.kernels.paged_attention import paged_decode_attention, prefill_attention
from nanovllm_teach.kernels.store_kvcache import _store_kvcache_kernel, store_kvcache

# Asked of a kernel object itself, so it is what Triton decided when it decorated the kernels: True means
# they run in the interpreter (any device, slowly); False means they are compiled and need a GPU.
INTERPRETED: bool = isinstance(_store_kvcache_kernel, InterpretedFunction)
# The same question of Triton's own helpers. It differs from INTERPRETED when TRITON_INTERPRET was set in
# the process after triton was imported: interpreted kernels then fail calling the compiled helpers.
TRITON_HELPERS_INTERPRETED: bool = isinstance(tl.standard.zeros, InterpretedFunction)

__all__ = ["INTERPRETED", "TRITON_HELPERS_INTERPRETED", "paged_decode_attention", "prefill_attention", "store_kvcache"]
