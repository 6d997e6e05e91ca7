"""Exercise ``decode_slot`` — where a decode token's K/V goes: the slot mapping.

The KV cache is one big array of *slots*, ``num_blocks * block_size`` of them: block ``b`` owns slots
``b * block_size`` to ``b * block_size + block_size - 1``. Before each decode step the model runner
(``ModelRunner.prepare_decode`` in ``nanovllm_teach/engine/model_runner.py``) tells the attention layers,
for every sequence, the slot where the K/V of its newest token must be stored: the ``slot_mapping``.

Facts you need (``seq`` is the sequence's entry in the step's batch, a ``ScheduledSeq`` from
``nanovllm_teach/engine/batch.py``):

- ``seq.num_tokens`` counts every token, the newest one (the one this step computes) included.
- ``seq.block_table`` lists the physical blocks the sequence holds, in order: logical block ``i`` (tokens
  ``i * block_size`` to ``i * block_size + block_size - 1``) lives in physical block ``seq.block_table[i]``.
- The scheduler has already given the sequence a new block if the newest token starts one.

Example: block size 4, ``seq.block_table == [7, 2]`` and 6 tokens: the newest token is the 2nd token of
the sequence's 2nd block, which is physical block 2, so its slot is 9.

Positions count from 0. Grade it: ``nanovllm-teach grade decode_slot this_file.py``; a wrong slot shows
up as the first ``PREPARE_DECODE_TENSORS.slot_mapping`` that differs from the reference.
Stuck? ``hint("decode_slot", 1)`` says where to look, ``hint("decode_slot", 2)`` how.
"""

from __future__ import annotations

from nanovllm_teach.engine.batch import ScheduledSeq


def decode_slot(seq: ScheduledSeq, block_size: int) -> int:
    """The cache slot of ``seq``'s newest token."""
    raise NotImplementedError
