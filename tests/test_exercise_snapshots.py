"""A scheduler or block-manager method graded in the sandbox: its state goes as records and comes back checked.

The learner's function runs on objects rebuilt from a snapshot (``snapshots.run``, here in this process
through a stand-in for the worker that sends every frame through JSON as the real one does); what comes
back is checked before the engine's objects take it. An honest answer leaves the engine exactly where the
engine's own method leaves it; a hostile one (a sequence that does not exist, a block that does not exist
or that the sequence does not hold, changed tokens, a queue left inconsistent, changed limits) is refused
with its sentence, and the engine is left as it was. Then the same through bubblewrap, graded.
"""

from __future__ import annotations

import copy
import re
import textwrap

import msgspec
import pytest

from nanovllm_teach.engine.decisions import Allocated
from nanovllm_teach.engine.scheduler import Scheduler
from nanovllm_teach.engine.sequence import Sequence
from nanovllm_teach.exercises import EXERCISES, grade
from nanovllm_teach.exercises.engine_grading import Piece
from nanovllm_teach.exercises.remote import RemoteFailure
from nanovllm_teach.exercises.snapshots import StateCall, StateWire, run, snapshot
from nanovllm_teach.sampling_params import SamplingParams


class InProcessWorker:
    """The worker's side of one call, in this process: the frames through JSON, the call through ``run``."""

    def __init__(self, function):
        self.function = function

    def call(self, function, args, types, adapter=None):
        call = msgspec.json.decode(msgspec.json.encode(args[0]), type=StateCall)
        return msgspec.json.decode(msgspec.json.encode(run(self.function, call)))


def _busy_scheduler() -> Scheduler:
    """Four sequences, a tight cache of 7 blocks of 4, a few steps in: some decode, some wait."""
    scheduler = Scheduler(max_num_seqs=4, max_num_batched_tokens=32, max_model_len=64, eos=-1, num_kvcache_blocks=7,
                          block_size=4)
    for i, length in enumerate((6, 5, 7, 3)):
        tokens = list(range(100 * i, 100 * i + length))
        scheduler.add(Sequence(i, tokens, SamplingParams(temperature=0, max_tokens=9), 4))
    for step in range(3):
        batch, _ = scheduler.schedule()
        scheduler.postprocess(batch, [7 + step] * len(batch.seqs))
    assert scheduler.running and any(s.block_table for s in scheduler.running)
    return scheduler


def _state(scheduler: Scheduler):
    return msgspec.to_builtins(snapshot(scheduler.block_manager, list(scheduler.accepted.values()), scheduler))


def test_an_honest_schedule_decode_leaves_the_engine_where_its_own_method_does():
    ours, theirs = _busy_scheduler(), _busy_scheduler()
    expected, expected_decisions = theirs.schedule_decode()
    got, decisions = StateWire("scheduler").call(InProcessWorker(Scheduler.schedule_decode), "schedule_decode", (ours,))
    assert [s.seq_id for s in got] == [s.seq_id for s in expected]
    assert all(seq is ours.accepted[seq.seq_id] for seq in got)  # the engine's own objects, not copies
    assert decisions == expected_decisions and expected_decisions  # the records cross back, as records
    assert _state(ours) == _state(theirs)


def _steal(scheduler):
    seq = scheduler.running[0]
    stolen = next(b for b in range(7) if b not in seq.block_table)
    return [seq], [Allocated(seq.seq_id, [stolen], [], 0, 0)]


def _ghost(scheduler):
    return [Sequence(999, [1, 2], SamplingParams(), 4)], []


def _outside(scheduler):
    scheduler.running[0].block_table.append(10**6)
    return [scheduler.running[0]], []


def _rewrite(scheduler):
    scheduler.running[0].token_ids[0] = 42
    return [scheduler.running[0]], []


def _drop(scheduler):
    return [scheduler.running.popleft()], []


def _limits(scheduler):
    scheduler.max_num_seqs = 100
    return list(scheduler.running), []


@pytest.mark.parametrize("hostile, sentence", [
    (_steal, r"recorded that seq \d+ got block \d+, which its block table does not hold"),
    (_ghost, r"named seq 999, which is not one of the sequences the engine gave it"),
    (_outside, r"named block 1000000, which does not exist \(the cache has blocks 0 to 6\)"),
    (_rewrite, r"changed seq \d+'s tokens: only postprocess appends a token"),
    (_drop, r"left seq \d+ in the wrong place: every accepted sequence waits or runs"),
])
def test_a_hostile_answer_is_refused_with_its_reason_and_the_engine_is_left_as_it_was(hostile, sentence):
    scheduler = _busy_scheduler()
    before = copy.deepcopy(_state(scheduler))
    with pytest.raises(RemoteFailure) as raised:
        StateWire("scheduler").call(InProcessWorker(hostile), "schedule_decode", (scheduler,))
    assert raised.value.failure.refused is True
    assert raised.value.failure.function == "schedule_decode"
    assert re.match(sentence, raised.value.failure.message), raised.value.failure.message
    assert _state(scheduler) == before


def test_a_limit_the_method_changed_stays_in_the_sandbox():
    """The limits go in and never come back: a method that raised max_num_seqs for itself saw it raised, the
    engine's own limit is as it was (what that method decided with it shows in the trace)."""
    scheduler = _busy_scheduler()
    limit = scheduler.max_num_seqs
    StateWire("scheduler").call(InProcessWorker(_limits), "schedule_decode", (scheduler,))
    assert scheduler.max_num_seqs == limit != 100


class StatusForgingWorker(InProcessWorker):
    """A worker whose answer (the frames are the learner's process's to write) gives a sequence a status the
    engine has no name for."""

    def call(self, function, args, types, adapter=None):
        answer = super().call(function, args, types, adapter)
        answer["state"]["seqs"][0]["status"] = "DONE"
        return answer


def test_an_answer_with_a_status_the_engine_does_not_have_is_refused():
    scheduler = _busy_scheduler()
    before = copy.deepcopy(_state(scheduler))
    with pytest.raises(RemoteFailure) as raised:
        StateWire("scheduler").call(StatusForgingWorker(Scheduler.schedule_decode), "schedule_decode", (scheduler,))
    assert raised.value.failure.refused is True
    assert raised.value.failure.message.startswith("answered with something that is not the engine's state")
    assert "'DONE'" in raised.value.failure.message
    assert _state(scheduler) == before


def test_a_schedule_decode_handing_out_a_block_it_does_not_own_fails_in_bubblewrap(tmp_path):
    path = tmp_path / "thief.py"
    path.write_text(textwrap.dedent("""
        from nanovllm_teach.engine.decisions import Allocated

        def schedule_decode(scheduler):
            seq = scheduler.running[0]
            return [seq], [Allocated(seq.seq_id, [b for b in range(len(scheduler.block_manager.blocks))
                                                  if b not in seq.block_table][:1], [], 0, 0)]
    """))
    result = grade("schedule_decode", path)
    assert not result.passed and result.isolated is True
    assert "your schedule_decode recorded that seq" in result.message
    assert "which its block table does not hold" in result.message


def test_the_exercises_that_act_on_state_send_it_as_a_snapshot_and_no_piece_can_stay_beside_the_engine():
    for name in ("schedule_prefill", "schedule_decode", "postprocess", "can_allocate", "can_append", "allocate"):
        assert all(piece.state is not None for piece in EXERCISES[name].pieces), name
    with pytest.raises(ValueError, match="'mine' needs exactly one of wire= .* and state="):
        Piece("mine", "nanovllm_teach.engine.scheduler:Scheduler.schedule_decode")
