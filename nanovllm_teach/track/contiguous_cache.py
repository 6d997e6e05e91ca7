"""A contiguous KV cache, the one chapter 6 of the build-it-yourself track has the learner write before paging.

Role: teaching (the track), beside the engine, not in it: the engine pages its cache (``layers/attention_torch.py``)
and has no contiguous one. These two functions are chapter 6's solutions (``build start --with-solutions``
copies them); its check does not compare the learner's functions with them but with the engine's paged
attention on the same keys and values (``track/checks_cache.py``). Emits no events.

Each sequence owns one row of the cache, ``max_len`` positions long, reserved up front whatever the sequence
will use: simple to index, wasteful to hold (the waste paging removes in chapter 7).
"""

from __future__ import annotations

import torch

from nanovllm_teach.layers.attention_torch import attend


def store_contiguous(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     positions: torch.Tensor) -> None:
    """Write each sequence's new K/V row into its own row of the cache, at ``positions`` (in place)."""
    # One new token per sequence: sequence i's row goes to its own row of the cache, at its position.
    rows = torch.arange(k.size(0), device=k.device)
    k_cache[rows, positions] = k
    v_cache[rows, positions] = v


def decode_contiguous(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, context_lens: torch.Tensor,
                      scale: float) -> torch.Tensor:
    """One query per sequence over the first ``context_lens[i]`` rows of its own cache row."""
    # The new token's query sees every key its sequence has written, its own included: nothing is masked,
    # because nothing after it exists yet.
    out = torch.empty_like(q)
    for i, length in enumerate(context_lens.tolist()):
        out[i] = attend(q[i:i + 1], k_cache[i, :length], v_cache[i, :length], scale, None, is_causal=False)[0]
    return out
