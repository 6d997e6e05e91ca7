"""The worker's side of a scheduler or block-manager method graded in the sandbox (``snapshots.StateWire``).

Role: grading, inside the sandbox's edge: the worker runs ``run`` on the grading copy of the package, named
by ``snapshots.RUN`` as its adapter. Emits no events.

``run`` rebuilds a ``Scheduler``, a ``BlockManager`` and ``Sequence`` objects from the records of a
``StateCall`` (the resources layer is pure Python), calls the learner's function on them exactly as the
engine would, and answers with the result (a ``Sequence`` as ``{"seq": id}``, a decision record as
``{"decision": name, "fields": ...}``, so that the decisions a method returns cross too) and the state after
(``snapshot``). The grading child checks that answer before the engine takes any of it (``snapshots``).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import msgspec

from nanovllm_teach.engine.batch import ScheduledBatch
from nanovllm_teach.engine.block_manager import Block, BlockManager
from nanovllm_teach.engine.scheduler import Scheduler
from nanovllm_teach.engine.sequence import Sequence, SequenceStatus
from nanovllm_teach.exercises.snapshots import RECORDS, SeqRecord, StateCall, snapshot


def _rebuild_seq(record: SeqRecord, block_size: int) -> Sequence:
    seq = Sequence.__new__(Sequence)
    for name in SeqRecord.__struct_fields__:
        setattr(seq, name, getattr(record, name))
    seq.status = SequenceStatus(record.status)
    seq.block_size = block_size
    seq.num_tokens = len(record.token_ids)
    seq.last_token = record.token_ids[-1]
    return seq


def _encode(value: Any) -> Any:
    """A result as data: a sequence as its id, a decision as its record's name and fields."""
    if isinstance(value, Sequence):
        return {"seq": value.seq_id}
    if isinstance(value, tuple(RECORDS.values())):
        return {"decision": type(value).__name__, "fields": msgspec.to_builtins(value)}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


def run(function: Any, call: StateCall) -> dict[str, Any]:
    """In the worker: ``function`` called on objects rebuilt from ``call``; the result and the state after."""
    state = call.state
    bm = BlockManager(len(state.blocks), state.block_size, state.enable_prefix_caching)
    bm.blocks = [Block(i, r.ref_count, r.hash, list(r.token_ids)) for i, r in enumerate(state.blocks)]
    bm.free_block_ids = deque(state.free_block_ids)
    bm.used_block_ids = set(state.used_block_ids)
    bm.hash_to_block_id = dict(state.hash_to_block_id)
    seqs = {r.seq_id: _rebuild_seq(r, state.block_size) for r in state.seqs}
    target: Any = bm
    if call.target == "scheduler":
        q = state.scheduler
        target = Scheduler(max_num_seqs=q.max_num_seqs, max_num_batched_tokens=q.max_num_batched_tokens,
                           max_model_len=q.max_model_len, eos=q.eos, num_kvcache_blocks=len(state.blocks),
                           block_size=state.block_size, enable_prefix_caching=state.enable_prefix_caching,
                           policy=q.policy)
        target.block_manager = bm
        target.waiting = deque(seqs[i] for i in q.waiting)
        target.running = deque(seqs[i] for i in q.running)
        target.accepted = {i: seqs[i] for i in q.accepted}
    args = [seqs[a] if kind == "seq" else msgspec.convert(a, ScheduledBatch) if kind == "batch" else a
            for kind, a in zip(call.kinds, call.args)]
    result = function(target, *args)
    after = snapshot(bm, list(seqs.values()), target if call.target == "scheduler" else None)
    return {"result": _encode(result), "state": msgspec.to_builtins(after)}
