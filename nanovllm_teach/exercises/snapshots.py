"""The scheduler's and the block manager's state as records, for the learner's methods that act on them.

Role: grading: the records both sides of the sandbox's edge share, the grading child's side (``StateWire``)
and the worker's (``run``, imported there on the grading copy of the package). Emits no events.

The live objects stay with the engine, outside the sandbox. ``StateWire.call`` sends a snapshot of what the
method may read; inside, ``run`` rebuilds the objects from it (the resources layer is pure Python), calls the
learner's method and answers with its result and the state after. Only what a call may change is applied (the
limits stay the engine's), and only once the whole answer is checked (``_checked``): a refused answer leaves the
engine as it was. What the engine cannot go on from is refused; a count or a free list merely wrong is not: the
engine goes on, as with its own code, and the trace shows the mistake where it first makes a difference.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, get_args

import msgspec

from nanovllm_teach.engine.batch import ScheduledBatch
from nanovllm_teach.engine.block_manager import BlockManager
from nanovllm_teach.engine.decisions import Allocated, Decision
from nanovllm_teach.engine.scheduler import Scheduler
from nanovllm_teach.engine.sequence import Sequence, SequenceStatus
from nanovllm_teach.exercises.worker import Failure
from nanovllm_teach.i18n import Text, say

RECORDS = {cls.__name__: cls for cls in get_args(Decision)}
STATE_CALL = "nanovllm_teach.exercises.snapshots:StateCall"
# The worker's side, named for the worker to import on the grading copy: this side never runs it.
RUN = "nanovllm_teach.exercises.snapshots:run"


class BlockRecord(msgspec.Struct, array_like=True):
    ref_count: int
    hash: int
    token_ids: list[int]


# The engine's own fields, by their own names: the records are converted from the live objects and back
# generically (``msgspec``, ``from_attributes``), and an answer is checked against these types as it is read.
class SeqRecord(msgspec.Struct):
    seq_id: int
    status: SequenceStatus
    token_ids: list[int]
    num_prompt_tokens: int
    num_cached_tokens: int
    num_scheduled_tokens: int
    block_table: list[int]
    temperature: float
    max_tokens: int
    ignore_eos: bool
    seed: int | None
    skip_special_tokens: bool
    finish_reason: str | None
    num_preemptions: int


class SchedulerRecord(msgspec.Struct):
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    eos: int
    policy: str
    waiting: list[int]
    running: list[int]
    accepted: list[int]


class Snapshot(msgspec.Struct):
    block_size: int
    enable_prefix_caching: bool
    blocks: list[BlockRecord]
    free_block_ids: list[int]
    used_block_ids: list[int]
    hash_to_block_id: list[tuple[int, int]]
    seqs: list[SeqRecord]
    scheduler: SchedulerRecord | None = None


class StateCall(msgspec.Struct):
    """One call: the state, what the function is a method of (``"scheduler"`` or ``"block_manager"``), and
    its other arguments, each with its kind (``"seq"``: a sequence's id; ``"batch"``: a ``ScheduledBatch``;
    anything else: plain data)."""

    state: Snapshot
    target: str
    kinds: list[str]
    args: list[Any]


class Answer(msgspec.Struct):
    result: Any
    state: Snapshot


# ---- both sides: objects to records, and records into objects ----

def snapshot(bm: BlockManager, seqs: list[Sequence], scheduler: Scheduler | None) -> Snapshot:
    queues = None
    if scheduler is not None:
        queues = SchedulerRecord(scheduler.max_num_seqs, scheduler.max_num_batched_tokens, scheduler.max_model_len,
                                 scheduler.eos, scheduler.policy,
                                 [s.seq_id for s in scheduler.waiting], [s.seq_id for s in scheduler.running],
                                 list(scheduler.accepted))
    return Snapshot(bm.block_size, bm.enable_prefix_caching,
                    msgspec.convert(bm.blocks, list[BlockRecord], from_attributes=True),
                    list(bm.free_block_ids), sorted(bm.used_block_ids), list(bm.hash_to_block_id.items()),
                    msgspec.convert(seqs, list[SeqRecord], from_attributes=True), queues)


def restore(after: Snapshot, bm: BlockManager, seqs: dict[int, Sequence], scheduler: Scheduler | None) -> None:
    """Set the objects to the state ``after``, in place (only what a call may change)."""
    for block, record in zip(bm.blocks, after.blocks):
        block.ref_count, block.hash, block.token_ids = record.ref_count, record.hash, list(record.token_ids)
    bm.free_block_ids.clear()
    bm.free_block_ids.extend(after.free_block_ids)
    bm.used_block_ids.clear()
    bm.used_block_ids.update(after.used_block_ids)
    bm.hash_to_block_id.clear()
    bm.hash_to_block_id.update(after.hash_to_block_id)
    for record in after.seqs:
        seq = seqs[record.seq_id]
        for token in record.token_ids[seq.num_tokens:]:
            seq.append_token(token)
        seq.status = record.status
        seq.num_cached_tokens, seq.num_scheduled_tokens = record.num_cached_tokens, record.num_scheduled_tokens
        seq.block_table = list(record.block_table)
        seq.finish_reason, seq.num_preemptions = record.finish_reason, record.num_preemptions
    if scheduler is not None:
        queues = after.scheduler
        scheduler.waiting.clear()
        scheduler.waiting.extend(seqs[i] for i in queues.waiting)
        scheduler.running.clear()
        scheduler.running.extend(seqs[i] for i in queues.running)
        scheduler.accepted.clear()
        scheduler.accepted.update((i, seqs[i]) for i in queues.accepted)


# ---- inside (the worker): rebuild the objects, call the learner's function ----

def _rebuild_seq(record: SeqRecord, block_size: int) -> Sequence:
    seq = Sequence.__new__(Sequence)
    for name in SeqRecord.__struct_fields__:
        setattr(seq, name, getattr(record, name))
    seq.block_size = block_size
    seq.num_tokens = len(record.token_ids)
    seq.last_token = record.token_ids[-1]
    return seq


def _encode_result(value: Any) -> Any:
    """A result as data: a sequence as its id, a decision as its record's name and fields."""
    if isinstance(value, Sequence):
        return {"seq": value.seq_id}
    if isinstance(value, Decision):
        return {"decision": type(value).__name__, "fields": msgspec.to_builtins(value)}
    if isinstance(value, (list, tuple)):
        return [_encode_result(v) for v in value]
    return value


def run(function: Any, call: StateCall) -> dict[str, Any]:
    state = call.state
    bm = BlockManager(len(state.blocks), state.block_size, state.enable_prefix_caching)
    seqs = {r.seq_id: _rebuild_seq(r, state.block_size) for r in state.seqs}
    scheduler = None
    if call.target == "scheduler":
        q = state.scheduler
        scheduler = Scheduler(max_num_seqs=q.max_num_seqs, max_num_batched_tokens=q.max_num_batched_tokens,
                              max_model_len=q.max_model_len, eos=q.eos, num_kvcache_blocks=len(state.blocks),
                              block_size=state.block_size, enable_prefix_caching=state.enable_prefix_caching,
                              policy=q.policy)
        scheduler.block_manager = bm
    restore(state, bm, seqs, scheduler)
    target: Any = bm if scheduler is None else scheduler
    args = [seqs[a] if kind == "seq" else msgspec.convert(a, ScheduledBatch) if kind == "batch" else a
            for kind, a in zip(call.kinds, call.args)]
    result = function(target, *args)
    after = snapshot(bm, list(seqs.values()), scheduler)
    return {"result": _encode_result(result), "state": msgspec.to_builtins(after)}


# ---- outside: check the answer, then apply it ----

# Said after "your <function> " in the verdict.
NOT_STATE = Text(en="answered with something that is not the engine's state: {error}",
                 zh="给出的回答不是引擎的状态：{error}")
UNKNOWN_SEQ = Text(en="named seq {seq}, which is not one of the sequences the engine gave it",
                   zh="提到了序列 {seq}，它不是引擎交给你的序列之一")
UNKNOWN_BLOCK = Text(en="named block {block}, which does not exist (the cache has blocks 0 to {last})",
                     zh="提到了块 {block}，它并不存在（缓存里的块是 0 到 {last}）")
TWICE_IN_TABLE = Text(en="put block {block} twice in seq {seq}'s block table",
                      zh="把块 {block} 两次放进了序列 {seq} 的块表")
TWICE_FREE = Text(en="put block {block} in the free list twice", zh="把块 {block} 两次放进了空闲列表")
NEGATIVE = Text(en="left block {block} with ref_count {count}: a ref_count counts the sequences holding the block, "
                   "never below 0",
                zh="让块 {block} 的 ref_count 变成了 {count}：ref_count 是持有这个块的序列数，不会小于 0")
NOT_HELD = Text(en="recorded that seq {seq} got block {block}, which its block table does not hold",
                zh="记录了序列 {seq} 得到了块 {block}，但它的块表里并没有这个块")
TOKENS = Text(en="changed seq {seq}'s tokens: only postprocess appends a token, the one sampled for it",
              zh="改动了序列 {seq} 的 token：只有 postprocess 会追加 token，而且只追加为它采样出的那一个")
COUNTS = Text(en="left seq {seq} with num_cached_tokens {cached} and num_scheduled_tokens {scheduled} for its "
                 "{tokens} tokens",
              zh="让序列 {seq} 在共有 {tokens} 个 token 时 num_cached_tokens 为 {cached}、num_scheduled_tokens 为 "
                 "{scheduled}")
QUEUES = Text(en="left seq {seq} in the wrong place: every accepted sequence waits or runs, in one queue, once",
              zh="把序列 {seq} 放错了地方：每个已接纳的序列要么在等待、要么在运行，只在一个队列中出现一次")


class Refused(Exception):
    """The answer cannot be applied; the message says why, after "your <function> "."""


def _block_ids(ids: list[int], last: int) -> None:
    for block in ids:
        if not 0 <= block <= last:
            raise Refused(say(UNKNOWN_BLOCK, block=block, last=last))


def _check_blocks(before: Snapshot, after: Snapshot) -> None:
    """What the engine needs to go on: blocks that exist, no block twice in a table or in the free list, no
    negative count."""
    last = len(before.blocks) - 1
    if len(after.blocks) != len(before.blocks):
        raise Refused(say(NOT_STATE, error=f"{len(after.blocks)} blocks where the cache has {len(before.blocks)}"))
    for seq in after.seqs:
        _block_ids(seq.block_table, last)
        for block, times in Counter(seq.block_table).items():
            if times > 1:
                raise Refused(say(TWICE_IN_TABLE, block=block, seq=seq.seq_id))
    _block_ids(after.free_block_ids + after.used_block_ids + [b for _, b in after.hash_to_block_id], last)
    for block, times in Counter(after.free_block_ids).items():
        if times > 1:
            raise Refused(say(TWICE_FREE, block=block))
    for block, record in enumerate(after.blocks):
        if record.ref_count < 0:
            raise Refused(say(NEGATIVE, block=block, count=record.ref_count))
        if len(record.token_ids) > before.block_size:
            raise Refused(say(NOT_STATE, error=f"block {block} holds {len(record.token_ids)} tokens"))


def _check_seqs(before: Snapshot, after: Snapshot, appended: dict[int, int]) -> None:
    if [s.seq_id for s in after.seqs] != [s.seq_id for s in before.seqs]:
        unknown = next((s.seq_id for s in after.seqs if s.seq_id not in {b.seq_id for b in before.seqs}), None)
        if unknown is not None:
            raise Refused(say(UNKNOWN_SEQ, seq=unknown))
        raise Refused(say(NOT_STATE, error="sequences went missing"))
    for old, new in zip(before.seqs, after.seqs):
        grown = new.token_ids[len(old.token_ids):]
        if new.token_ids[:len(old.token_ids)] != old.token_ids or grown not in ([], [appended.get(old.seq_id)]):
            raise Refused(say(TOKENS, seq=old.seq_id))
        if min(new.num_cached_tokens, new.num_scheduled_tokens) < 0 \
                or new.num_cached_tokens + new.num_scheduled_tokens > len(new.token_ids):
            raise Refused(say(COUNTS, seq=old.seq_id, cached=new.num_cached_tokens,
                              scheduled=new.num_scheduled_tokens, tokens=len(new.token_ids)))


def _check_queues(before: SchedulerRecord, after: SchedulerRecord) -> None:
    known = set(before.accepted)
    for seq in after.accepted + after.waiting + after.running:
        if seq not in known:
            raise Refused(say(UNKNOWN_SEQ, seq=seq))
    queued = Counter(after.waiting + after.running)
    for seq in set(queued) | set(after.accepted):
        if queued[seq] != 1 or seq not in after.accepted or after.accepted.count(seq) != 1:
            raise Refused(say(QUEUES, seq=seq))


def _decode_result(value: Any, seqs: dict[int, Sequence], last: int, tables: dict[int, set[int]]) -> Any:
    if isinstance(value, list):
        return [_decode_result(v, seqs, last, tables) for v in value]
    if isinstance(value, dict) and set(value) == {"seq"}:
        if value["seq"] not in seqs:
            raise Refused(say(UNKNOWN_SEQ, seq=value["seq"]))
        return seqs[value["seq"]]
    if isinstance(value, dict) and set(value) == {"decision", "fields"}:
        return _decision(value["decision"], value["fields"], seqs, last, tables)
    return value


def _decision(name: Any, fields: Any, seqs: dict[int, Sequence], last: int, tables: dict[int, set[int]]) -> Any:
    """A decision record the call returned, checked: its sequences exist, its blocks exist, and
    the blocks it says a sequence got are in that sequence's block table (before or after the call)."""
    if name not in RECORDS:
        raise Refused(say(NOT_STATE, error=f"a record named {str(name)[:40]!r}"))
    try:
        record = msgspec.convert(fields, RECORDS[name])
    except msgspec.ValidationError as error:
        raise Refused(say(NOT_STATE, error=str(error)[:200])) from None
    for field in ("seq_id", "needed_by"):
        if hasattr(record, field) and getattr(record, field) not in seqs:
            raise Refused(say(UNKNOWN_SEQ, seq=getattr(record, field)))
    for field in ("block_ids", "shared_block_ids", "freed_block_ids"):
        _block_ids(getattr(record, field, []), last)
    if isinstance(record, Allocated):
        for block in record.block_ids + record.shared_block_ids:
            if block not in tables.get(record.seq_id, set()):
                raise Refused(say(NOT_HELD, seq=record.seq_id, block=block))
    return record


def _checked(answer: Any, before: Snapshot, seqs: dict[int, Sequence], appended: dict[int, int]) -> Answer:
    """The answer with its result decoded into the engine's objects, once every check has passed."""
    try:
        answer = msgspec.convert(answer, Answer)
    except msgspec.ValidationError as error:
        raise Refused(say(NOT_STATE, error=str(error)[:200])) from None
    after, last = answer.state, len(before.blocks) - 1
    _check_seqs(before, after, appended)
    _check_blocks(before, after)
    if (before.scheduler is None) != (after.scheduler is None):
        raise Refused(say(NOT_STATE, error="the scheduler's queues"))
    if before.scheduler is not None:
        _check_queues(before.scheduler, after.scheduler)
    tables = {s.seq_id: set(s.block_table) for s in before.seqs}
    for seq in after.seqs:
        tables[seq.seq_id] |= set(seq.block_table)
    return Answer(_decode_result(answer.result, seqs, last, tables), after)


@dataclass(frozen=True)
class StateWire:
    """How a method of the scheduler or of the block manager crosses the sandbox's edge (see ``StateCall``)."""

    target: str
    kinds: tuple[str, ...] = ()

    def call(self, worker: Any, function: str, args: tuple[Any, ...]) -> Any:
        """The proxy's body: the result, or ``RemoteFailure`` (``refused``) with the engine left as it was."""
        from nanovllm_teach.exercises.remote import RemoteFailure

        owner, *rest = args
        scheduler = owner if self.target == "scheduler" else None
        bm = scheduler.block_manager if scheduler is not None else owner
        seqs = dict(scheduler.accepted) if scheduler is not None else {}
        seqs.update((a.seq_id, a) for kind, a in zip(self.kinds, rest) if kind == "seq")
        appended = {}
        if self.kinds == ("batch", "list[int]"):  # postprocess: each sequence may take its sampled token
            appended = dict(zip(rest[0].seq_ids, rest[1]))
        before = snapshot(bm, list(seqs.values()), scheduler)
        encoded = [a.seq_id if kind == "seq" else a for kind, a in zip(self.kinds, rest)]
        answer = worker.call(function, (StateCall(before, self.target, list(self.kinds), encoded),), (STATE_CALL,),
                             adapter=RUN)
        try:
            checked = _checked(answer, before, seqs, appended)
        except Refused as refused:
            raise RemoteFailure(Failure(function, message=str(refused), refused=True)) from None
        restore(checked.state, bm, seqs, scheduler)
        return checked.result
