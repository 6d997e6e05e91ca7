"""Execution-layer helper: where a token's K/V sits in the paged cache, the one copy of the slot formula.

A slot is a row of the cache, ``block id * block_size + offset in the block``. The engine's prefill layout and
decode step (``engine.prefill_layout``, ``engine.model_runner.decode_slot``), the diagrams and the decode-cost
measurement (``models.step_cost``) all take it from here: the models layer may not import the engine, and a
second copy would answer for a learner while ``decode_slot`` or ``prepare_prefill`` is graded (the grader
disables this function along with their points). Pure Python, no torch; emits no events.
"""

from __future__ import annotations

from collections.abc import Sequence


def token_slot(block_table: Sequence[int], position: int, block_size: int) -> int:
    """The cache slot of the token at ``position`` of a sequence holding ``block_table``: the first slot of
    the block that holds the position, plus the position's offset in that block."""
    return block_table[position // block_size] * block_size + position % block_size
