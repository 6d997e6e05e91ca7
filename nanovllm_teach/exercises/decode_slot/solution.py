"""Reference solution of ``decode_slot``: the cache slot a decode step writes the newest token's K/V to."""

from __future__ import annotations

from nanovllm_teach.engine.batch import ScheduledSeq


def decode_slot(seq: ScheduledSeq, block_size: int) -> int:
    position = seq.num_tokens - 1  # the newest token, counted from 0
    block_id = seq.block_table[position // block_size]
    return block_id * block_size + position % block_size
