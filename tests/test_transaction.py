"""The step's checkpoint keeps each sequence's block table by reference (the list and its length), not as a
copy: a rollback must still give every sequence the table it had, as a list of its own, and leave alone the
lists that records handed out during the step hold. A table shortened in place breaks the invariant the
checkpoint relies on, and the rollback says so instead of restoring the wrong blocks.

Fault injection at every line of a real engine is in ``test_interrupts.py``; this is the scheduler alone."""

from __future__ import annotations

import pytest

from nanovllm_teach.engine import transaction
from nanovllm_teach.engine.decisions import Allocated, Freed, Preempted
from nanovllm_teach.engine.scheduler import Scheduler
from nanovllm_teach.engine.sequence import Sequence, SequenceStatus
from nanovllm_teach.sampling_params import SamplingParams


def _two_prefilled() -> tuple[Scheduler, Sequence, Sequence]:
    """Two sequences of one full block each, prefilled, each with a sampled token that starts a second
    block; one block free, so the next decode gives it to the first and preempts the second."""
    scheduler = Scheduler(max_num_seqs=4, max_num_batched_tokens=16, max_model_len=64, eos=-1,
                          num_kvcache_blocks=3, block_size=4, enable_prefix_caching=False)
    params = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)
    a, b = Sequence(0, [1, 2, 3, 4], params, 4), Sequence(1, [5, 6, 7, 8], params, 4)
    scheduler.add(a)
    scheduler.add(b)
    batch, _ = scheduler.schedule()
    assert batch.is_prefill and len(batch.seqs) == 2
    scheduler.postprocess(batch, [9, 9])
    return scheduler, a, b


def test_a_rollback_restores_tables_appended_to_and_given_up_and_leaves_the_steps_records_alone():
    scheduler, a, b = _two_prefilled()
    tables = {seq: list(seq.block_table) for seq in (a, b)}
    checkpoint = transaction.checkpoint(scheduler)
    batch, decisions = scheduler.schedule()  # the step: then it raises
    assert not batch.is_prefill and batch.seq_ids == [0]
    freed = next(d for d in decisions if isinstance(d, Freed))
    assert [type(d) for d in decisions] == [Allocated, Freed, Preempted] and freed.seq_id == 1
    assert len(a.block_table) == 2 and b.block_table == []
    given_back = list(freed.block_ids)

    transaction.rollback(scheduler, checkpoint)

    assert {seq: seq.block_table for seq in (a, b)} == tables
    assert a.status == b.status == SequenceStatus.RUNNING and list(scheduler.running) == [a, b]
    assert freed.block_ids == given_back  # the record handed out in the step still says what it said
    assert b.block_table is not freed.block_ids  # the restored table is a list of its own
    assert scheduler.block_manager.num_free_blocks == 1
    batch, _ = scheduler.schedule()  # the step again, from the same state: the same outcome
    assert batch.seq_ids == [0] and len(a.block_table) == 2


def test_a_table_shortened_in_place_during_the_step_stops_the_rollback():
    scheduler, a, _ = _two_prefilled()
    checkpoint = transaction.checkpoint(scheduler)
    a.block_table.clear()  # what no code of the engine does: the checkpoint holds this very list
    with pytest.raises(AssertionError, match="shortened in place"):
        transaction.rollback(scheduler, checkpoint)
