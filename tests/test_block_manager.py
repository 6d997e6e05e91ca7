"""The paged KV cache's bookkeeping, one rule at a time: ``Sequence`` and ``BlockManager`` without torch.

Every test drives the block manager the way the scheduler does: ``can_allocate`` → ``allocate`` before a
prefill, ``hash_blocks`` + ``num_cached_tokens += num_scheduled_tokens`` after the step computed the K/V,
``can_append`` / ``may_append`` before a decode, ``deallocate`` when a sequence finishes or is preempted.
Block size 4 throughout unless a test says otherwise, so "2 full blocks" means 8 tokens.

The block manager emits no events: every hand-out and release is a decision record (``Allocated``,
``Freed``: ``engine/decisions.py``) returned to its caller; the tests collect and check those.
What the trace says about them (``engine/teaching.py``) is checked at the end, through a real scheduler.
"""

from __future__ import annotations

import pytest

import nanovllm_teach.engine.block_manager as block_manager_module
from nanovllm_teach.engine.block_manager import NO_HASH, BlockManager, compute_block_hash
from nanovllm_teach.engine.decisions import Allocated, Decision, Freed
from nanovllm_teach.engine.scheduler import Scheduler
from nanovllm_teach.engine.sequence import Sequence, SequenceStatus
from nanovllm_teach.engine.teaching import Teaching
from nanovllm_teach.sampling_params import SamplingParams
from nanovllm_teach.trace import TraceRecorder

BS = 4


def make_seq(seq_id: int, token_ids: list[int], block_size: int = BS) -> Sequence:
    return Sequence(seq_id, token_ids, SamplingParams(temperature=0.0, max_tokens=16), block_size)


def make_bm(num_blocks: int, *, prefix_caching: bool = True) -> tuple[BlockManager, list[Decision]]:
    """A block manager, and the records its methods return, in order (collected here, as the scheduler
    collects them: the block manager keeps none)."""
    bm = BlockManager(num_blocks, BS, enable_prefix_caching=prefix_caching)
    log: list[Decision] = []
    for name in ("allocate", "deallocate", "may_append"):
        def collecting(*args, _method=getattr(bm, name)):
            record = _method(*args)
            if record is not None:
                log.append(record)
            return record
        setattr(bm, name, collecting)
    return bm, log


def compute(bm: BlockManager, seq: Sequence, num_tokens: int | None = None) -> None:
    """What a step does to the bookkeeping once the model has written ``num_tokens`` more K/V rows
    (default: everything not cached yet), exactly as ``Scheduler.postprocess`` does it."""
    seq.num_scheduled_tokens = seq.num_tokens - seq.num_cached_tokens if num_tokens is None else num_tokens
    bm.hash_blocks(seq)
    seq.num_cached_tokens += seq.num_scheduled_tokens
    seq.num_scheduled_tokens = 0


def admit(bm: BlockManager, seq: Sequence) -> int:
    """Allocate ``seq`` as the scheduler would; returns how many leading blocks came from the cache."""
    num_cached_blocks = bm.can_allocate(seq)
    assert num_cached_blocks >= 0, f"{seq} does not fit"
    allocation = bm.allocate(seq, num_cached_blocks)
    assert allocation.seq_id == seq.seq_id
    assert allocation.shared_block_ids + allocation.block_ids == seq.block_table
    assert allocation.num_cached_tokens == seq.num_cached_tokens and allocation.num_free_blocks == bm.num_free_blocks
    return num_cached_blocks


def prefill(bm: BlockManager, seq: Sequence) -> int:
    """Admit ``seq`` and compute its whole prompt in one step, so its full blocks become findable."""
    num_cached_blocks = admit(bm, seq)
    compute(bm, seq)
    return num_cached_blocks


def decided(log: list[Decision], kind: type) -> list[Decision]:
    """The records of one kind (``Allocated``, ``Freed``) in the log, in order."""
    return [d for d in log if isinstance(d, kind)]


def cache_hits(log: list[Decision]) -> list[Allocated]:
    """The allocations that reused cached prefix blocks (what the trace calls PREFIX_CACHE_HIT)."""
    return [d for d in decided(log, Allocated) if d.shared_block_ids]


def assert_consistent(bm: BlockManager, *live: Sequence) -> None:
    """Reference counts equal the number of live tables holding each block; free and used partition."""
    holders = {b.block_id: 0 for b in bm.blocks}
    for seq in live:
        for block_id in seq.block_table:
            holders[block_id] += 1
    assert {b.block_id: b.ref_count for b in bm.blocks} == holders
    free = list(bm.free_block_ids)
    assert len(free) == len(set(free)), "a block is twice in the free list"
    assert set(free) | bm.used_block_ids == set(range(bm.num_blocks))
    assert not set(free) & bm.used_block_ids
    assert bm.used_block_ids == {b for b, n in holders.items() if n > 0}


PROMPT = list(range(100, 109))  # 9 tokens: 2 full blocks and 1 token in a third


# ---- Sequence ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("num_tokens, num_blocks, last_block_num_tokens",
                         [(1, 1, 1), (3, 1, 3), (4, 1, 4), (5, 2, 1), (8, 2, 4), (9, 3, 1)])
def test_sequence_block_arithmetic(num_tokens, num_blocks, last_block_num_tokens):
    """A sequence of n tokens needs ceil(n / block_size) blocks; the last one holds the remainder (a
    whole block when n is a multiple of the block size, never zero tokens)."""
    seq = make_seq(0, list(range(num_tokens)))
    assert seq.num_blocks == num_blocks
    assert seq.last_block_num_tokens == last_block_num_tokens
    assert [t for i in range(num_blocks) for t in seq.block(i)] == seq.token_ids


def test_sequence_append_token_separates_prompt_and_completion():
    """Appending a sampled token grows the sequence and the completion; the prompt stays as it was."""
    seq = make_seq(7, [5, 6, 7])
    assert seq.status == SequenceStatus.WAITING and not seq.block_table
    seq.append_token(42)
    seq.append_token(43)
    assert (len(seq), seq.num_prompt_tokens, seq.num_completion_tokens) == (5, 3, 2)
    assert seq.prompt_token_ids == [5, 6, 7]
    assert seq.completion_token_ids == [42, 43]
    assert seq.last_token == 43
    assert seq.block(1) == [43]


# ---- allocation, reference counts, deallocation -----------------------------------------------------


def test_allocate_hands_out_fresh_blocks_from_the_free_list_head():
    """A new sequence gets ceil(n / block_size) blocks from the head of the free list, each with
    reference count 1, and nothing is cached yet; the ``Allocated`` record names the sequence and its blocks."""
    bm, log = make_bm(8)
    seq = make_seq(3, PROMPT)
    assert admit(bm, seq) == 0
    assert seq.block_table == [0, 1, 2]
    assert seq.num_cached_tokens == 0
    assert [bm.blocks[b].ref_count for b in range(8)] == [1, 1, 1, 0, 0, 0, 0, 0]
    assert bm.num_free_blocks == 5 and bm.used_block_ids == {0, 1, 2}
    assert log == [Allocated(seq_id=3, block_ids=[0, 1, 2], shared_block_ids=[], num_cached_tokens=0,
                             num_free_blocks=5)]
    assert not cache_hits(log)
    assert_consistent(bm, seq)


def test_can_allocate_refuses_a_sequence_that_does_not_fit_and_changes_nothing():
    """``can_allocate`` answers -1 when the free list is too short; the state is untouched."""
    bm, log = make_bm(2)
    seq = make_seq(0, PROMPT)  # needs 3 blocks
    assert bm.can_allocate(seq) == -1
    assert bm.num_free_blocks == 2 and not seq.block_table and not log


def test_deallocate_returns_every_block_and_records_freed():
    """Freeing a sequence drops each of its references; blocks nobody holds go back to the free list
    (at its tail, last block first) and the ``Freed`` record lists them."""
    bm, log = make_bm(8)
    seq = make_seq(5, PROMPT)
    prefill(bm, seq)
    freed = bm.deallocate(seq)
    assert seq.block_table == [] and seq.num_cached_tokens == 0
    assert bm.num_free_blocks == 8 and not bm.used_block_ids
    assert list(bm.free_block_ids) == [3, 4, 5, 6, 7, 2, 1, 0]
    assert freed == Freed(seq_id=5, block_ids=[0, 1, 2], freed_block_ids=[2, 1, 0], num_free_blocks=8)
    assert log[-1] is freed and decided(log, Freed) == [freed]
    assert_consistent(bm)


# ---- prefix caching -------------------------------------------------------------------------------


def test_shared_prefix_reuses_the_same_blocks_with_reference_count_two():
    """Two sequences whose first 2 full blocks are equal share those block ids (reference count 2): the
    second one starts with 8 cached tokens, and its ``Allocated`` record says which blocks are shared and
    which are fresh."""
    bm, log = make_bm(8)
    a = make_seq(0, PROMPT)
    assert prefill(bm, a) == 0
    b = make_seq(1, PROMPT[:8] + [7, 7])
    assert admit(bm, b) == 2
    assert b.block_table[:2] == a.block_table[:2] == [0, 1]
    assert b.block_table[2] not in a.block_table
    assert [bm.blocks[i].ref_count for i in (0, 1, 2, 3)] == [2, 2, 1, 1]
    assert b.num_cached_tokens == 8
    assert cache_hits(log) == [Allocated(seq_id=1, block_ids=[3], shared_block_ids=[0, 1], num_cached_tokens=8,
                                         num_free_blocks=4)]
    assert log[-1] == cache_hits(log)[0]
    assert_consistent(bm, a, b)


def test_freeing_one_sharer_keeps_the_shared_blocks_for_the_other():
    """When one of two sharers leaves, the shared blocks stay in use (reference count back to 1); only
    the leaver's own blocks return to the free list."""
    bm, log = make_bm(8)
    a, b = make_seq(0, PROMPT), make_seq(1, PROMPT[:8] + [7, 7])
    prefill(bm, a)
    prefill(bm, b)
    bm.deallocate(a)
    assert decided(log, Freed) == [Freed(seq_id=0, block_ids=[0, 1, 2], freed_block_ids=[2], num_free_blocks=5)]
    assert bm.blocks[0].ref_count == bm.blocks[1].ref_count == 1
    assert_consistent(bm, b)


def test_partial_prefix_hits_only_the_equal_leading_blocks():
    """Only the leading run of equal blocks is reused: a sequence that agrees on block 0 but not on
    block 1 gets one cached block."""
    bm, _ = make_bm(8)
    prefill(bm, make_seq(0, PROMPT))
    b = make_seq(1, PROMPT[:4] + [1, 2, 3, 4, 5])
    assert admit(bm, b) == 1 and b.block_table[0] == 0 and b.num_cached_tokens == 4


def test_block_hash_is_chained_so_an_equal_block_after_a_different_prefix_misses():
    """The hash names a whole prefix: the same 4 tokens as someone's block 1 do not hit when the block
    before them differs (their K/V would differ too)."""
    bm, log = make_bm(8)
    prefill(bm, make_seq(0, PROMPT))
    b = make_seq(1, [9, 9, 9, 9] + PROMPT[4:])
    assert admit(bm, b) == 0 and not cache_hits(log)
    h0 = compute_block_hash(PROMPT[:4])
    assert compute_block_hash(PROMPT[4:8], h0) != compute_block_hash(PROMPT[4:8])


def test_a_poisoned_hash_table_entry_is_caught_by_the_token_check():
    """A hash that maps to a block holding different tokens (what a collision looks like) is not a hit:
    the tokens are compared before anyone reads that block's K/V."""
    bm, log = make_bm(8)
    a = make_seq(0, PROMPT)
    prefill(bm, a)
    other = [50, 51, 52, 53, 54]
    bm.hash_to_block_id[compute_block_hash(other[:4])] = a.block_table[0]  # collide with a's block 0
    b = make_seq(1, other)
    assert admit(bm, b) == 0
    assert a.block_table[0] not in b.block_table and not cache_hits(log)
    assert_consistent(bm, a, b)


def test_a_colliding_hash_function_is_caught_by_the_token_check(monkeypatch):
    """With a hash function under which every block collides, different tokens still never hit, while
    truly equal tokens still do."""
    monkeypatch.setattr(block_manager_module, "compute_block_hash", lambda token_ids, prefix_hash=NO_HASH: 42)
    bm, log = make_bm(8)
    a = make_seq(0, [1, 2, 3, 4, 5])
    prefill(bm, a)
    assert bm.hash_to_block_id == {42: a.block_table[0]}
    b = make_seq(1, [6, 7, 8, 9, 10])
    assert admit(bm, b) == 0
    c = make_seq(2, [1, 2, 3, 4, 99])
    assert admit(bm, c) == 1 and c.block_table[0] == a.block_table[0]
    assert [d.seq_id for d in cache_hits(log)] == [2]


def test_a_freed_block_stays_findable_until_it_is_handed_out_again():
    """A freed block keeps its hash and content: a later sequence with the same prefix gets the very
    same block ids back (out of the free list). Blocks taken from the free list in between do not
    matter, until the free list cycles round and the block is handed out fresh: then its old content is
    gone and the same prefix no longer hits."""
    bm, log = make_bm(6)
    a = make_seq(0, PROMPT)
    prefill(bm, a)
    shared = a.block_table[:2]
    bm.deallocate(a)
    assert bm.num_free_blocks == 6

    filler = make_seq(1, [7] * 12)  # 3 fresh blocks from the free-list head: 3, 4, 5
    prefill(bm, filler)
    assert not set(filler.block_table) & set(shared)

    b = make_seq(2, PROMPT[:8] + [1])
    assert admit(bm, b) == 2 and b.block_table[:2] == shared
    assert all(bm.blocks[i].ref_count == 1 for i in shared)  # taken out of the free list, not shared
    assert_consistent(bm, filler, b)
    bm.deallocate(b)
    bm.deallocate(filler)

    hog = make_seq(3, [8] * 24)  # every block, so the free list cycles through `shared`
    assert admit(bm, hog) == 0 and sorted(hog.block_table) == list(range(6))
    assert all(bm.blocks[i].hash == NO_HASH for i in shared)
    bm.deallocate(hog)

    c = make_seq(4, PROMPT[:8] + [1])
    assert admit(bm, c) == 0
    assert [d.seq_id for d in cache_hits(log)] == [2]


def test_the_last_token_is_never_served_from_the_cache():
    """A prompt of exactly 2 full blocks, all of them cached, reuses at most 1 block: the model must
    compute at least the last position to have logits for the next token. One more token and both hit."""
    bm, _ = make_bm(8)
    prefill(bm, make_seq(0, PROMPT[:8]))
    assert len(bm.hash_to_block_id) == 2
    same = make_seq(1, PROMPT[:8])
    assert admit(bm, same) == 1 and same.num_cached_tokens == 4
    longer = make_seq(2, PROMPT[:8] + [3])
    assert admit(bm, longer) == 2
    one_block = make_seq(3, PROMPT[:4])
    assert bm.can_allocate(one_block) == 0


def test_can_allocate_counts_a_free_cached_block_against_the_free_list():
    """Hitting a block nobody holds still takes it out of the free list, so it counts as needed."""
    bm, _ = make_bm(3)
    a = make_seq(0, PROMPT)
    prefill(bm, a)
    bm.deallocate(a)
    # 2 cached blocks (free, with their content) + 1 fresh = all 3 blocks: fits exactly.
    assert bm.can_allocate(make_seq(1, PROMPT)) == 2
    assert bm.can_allocate(make_seq(2, PROMPT + [0, 0, 0, 0])) == -1  # 4 blocks


def test_prefix_caching_off_never_hits():
    """With ``enable_prefix_caching=False`` nothing is hashed and equal prompts get separate blocks."""
    bm, log = make_bm(8, prefix_caching=False)
    a = make_seq(0, PROMPT)
    prefill(bm, a)
    b = make_seq(1, PROMPT + [1])
    assert admit(bm, b) == 0
    assert not set(a.block_table) & set(b.block_table)
    assert not bm.hash_to_block_id and not cache_hits(log)
    bm.deallocate(a)
    assert admit(bm, make_seq(2, PROMPT)) == 0


# ---- decode: one token at a time --------------------------------------------------------------------


def test_only_a_token_that_starts_a_new_block_needs_a_free_block():
    """Block size 4: going from 4 to 5 tokens needs a new block (``can_append`` is False with none
    free); going from 5 to 6 does not (True even with none free). ``may_append`` adds the block and
    returns its ``Allocated`` record; when no block is needed it returns None and records nothing."""
    bm, log = make_bm(2)
    a = make_seq(0, [1, 2, 3, 4])
    prefill(bm, a)
    blocker = make_seq(1, [9])
    prefill(bm, blocker)
    assert bm.num_free_blocks == 0

    a.append_token(5)  # 5 tokens: position 4 starts block 1
    assert a.num_blocks == 2 and not bm.can_append(a)
    bm.deallocate(blocker)
    assert bm.can_append(a)
    allocation = bm.may_append(a)
    assert a.block_table == [0, 1] and bm.num_free_blocks == 0
    assert allocation == Allocated(seq_id=0, block_ids=[1], shared_block_ids=[], num_cached_tokens=0,
                                   num_free_blocks=0)
    assert log[-1] is allocation
    compute(bm, a, 1)

    a.append_token(6)  # 6 tokens: position 5 is in block 1 already
    assert bm.can_append(a)
    n_decisions = len(log)
    assert bm.may_append(a) is None
    assert a.block_table == [0, 1] and len(log) == n_decisions
    assert_consistent(bm, a)


def test_decode_hashes_a_block_when_its_last_position_is_computed():
    """A decode step that writes the 4th position of a block names it, so later prompts can hit it."""
    bm, _ = make_bm(4)
    a = make_seq(0, [1, 2, 3])
    prefill(bm, a)
    assert not bm.hash_to_block_id
    a.append_token(4)  # position 3 is computed by the next decode step
    bm.may_append(a)
    compute(bm, a, 1)
    assert bm.hash_to_block_id == {compute_block_hash([1, 2, 3, 4]): a.block_table[0]}


# ---- chunked prefill ----------------------------------------------------------------------------------


def test_hash_blocks_after_a_chunked_step_names_only_the_completed_blocks():
    """After a chunk computed 6 of 10 tokens only block 0 is full and named (block 1 holds 2 computed
    tokens); the next chunk completes block 1, named with the chained hash. A sequence arriving in
    between hits block 0 only, even though block 1 is already allocated."""
    bm, _ = make_bm(8)
    a = make_seq(0, PROMPT + [109])  # 10 tokens, 3 blocks
    admit(bm, a)
    compute(bm, a, 6)
    h0 = compute_block_hash(PROMPT[:4])
    assert a.num_cached_tokens == 6
    assert bm.hash_to_block_id == {h0: a.block_table[0]}
    assert bm.can_allocate(make_seq(1, PROMPT)) == 1

    compute(bm, a, 4)
    h1 = compute_block_hash(PROMPT[4:8], h0)
    assert a.num_cached_tokens == 10
    assert bm.hash_to_block_id == {h0: a.block_table[0], h1: a.block_table[1]}
    assert bm.blocks[a.block_table[2]].hash == NO_HASH
    b = make_seq(2, PROMPT)
    assert admit(bm, b) == 2 and b.block_table[:2] == a.block_table[:2]


def test_identical_prompts_prefilled_together_get_separate_blocks_and_stay_consistent():
    """Two equal prompts in the same step cannot hit each other (nothing is named yet); both name their
    blocks with the same hashes, the table keeps one, and freeing either never unnames the other's."""
    bm, _ = make_bm(8)
    a, b = make_seq(0, PROMPT), make_seq(1, PROMPT)
    admit(bm, a)
    admit(bm, b)
    compute(bm, a)
    compute(bm, b)
    assert not set(a.block_table) & set(b.block_table)
    bm.deallocate(b)
    c = make_seq(2, PROMPT)
    assert admit(bm, c) == 2  # b's freed blocks (the table's entries) or a's, either way equal content
    for i in range(2):
        assert bm.blocks[c.block_table[i]].token_ids == c.block(i)
    assert_consistent(bm, a, c)


# ---- what the trace says about the records ------------------------------------------------------------
# The orchestration layer (``engine/teaching.py``) says each record as TEACHING events; driven here as the
# engine drives it: schedule, say the step's decisions, postprocess, say the finishes.


def make_scheduler(num_blocks: int) -> tuple[Scheduler, Teaching, TraceRecorder]:
    rec = TraceRecorder(validate=True)
    scheduler = Scheduler(max_num_seqs=4, max_num_batched_tokens=64, max_model_len=64, eos=-1,
                          num_kvcache_blocks=num_blocks, block_size=BS)
    return scheduler, Teaching(rec), rec


def engine_step(scheduler: Scheduler, teaching: Teaching) -> list[Decision]:
    """One step as ``LLMEngine._run_step`` takes it, every sampled token 5; returns the step's decisions."""
    batch, scheduled = scheduler.schedule()
    teaching.scheduled(batch, scheduled, scheduler, 0)
    seqs = [scheduler.accepted[entry.seq_id] for entry in batch.seqs]
    finishes = scheduler.postprocess(batch, [5] * len(batch.seqs))
    teaching.postprocessed(finishes, seqs)
    return scheduled + finishes


def said(rec: TraceRecorder, *names: str) -> list[tuple[str, str, str, dict]]:
    return [(e.event, e.phase, e.reason, e.stats) for e in rec.events if e.event in names]


def test_the_trace_says_each_admission_and_its_cached_prefix():
    """A prefill's ``Allocated`` records become BLOCK_ALLOCATE (reason admit_sequence), preceded by
    PREFIX_CACHE_HIT when it shares cached blocks, with the record's blocks and free count."""
    scheduler, teaching, rec = make_scheduler(8)
    params = SamplingParams(temperature=0.0, max_tokens=4, ignore_eos=True)
    scheduler.add(Sequence(0, PROMPT, params, BS))
    (first,) = engine_step(scheduler, teaching)
    assert first == Allocated(0, [0, 1, 2], [], 0, 5)
    scheduler.add(Sequence(1, PROMPT[:8] + [7, 7], params, BS))
    (second,) = engine_step(scheduler, teaching)
    assert second == Allocated(1, [3], [0, 1], 8, 4)
    assert said(rec, "BLOCK_ALLOCATE", "PREFIX_CACHE_HIT") == [
        ("BLOCK_ALLOCATE", "prefill", "admit_sequence",
         dict(seq_id=0, block_ids=[0, 1, 2], shared_block_ids=[], num_free_blocks=5)),
        ("PREFIX_CACHE_HIT", "prefill", "prefix_blocks_reused",
         dict(seq_id=1, num_cached_blocks=2, num_cached_tokens=8, block_ids=[0, 1])),
        ("BLOCK_ALLOCATE", "prefill", "admit_sequence",
         dict(seq_id=1, block_ids=[3], shared_block_ids=[0, 1], num_free_blocks=4))]


def test_the_trace_says_a_decode_block_and_the_blocks_a_finish_frees():
    """A decode's new block is BLOCK_ALLOCATE (reason decode_needs_new_block); a finish is RUNNING →
    FINISHED, then BLOCK_FREE (phase postprocess, reason finished) listing the ``Freed`` record's blocks."""
    scheduler, teaching, rec = make_scheduler(2)
    scheduler.add(Sequence(0, [1, 2, 3, 4], SamplingParams(temperature=0.0, max_tokens=2, ignore_eos=True), BS))
    engine_step(scheduler, teaching)  # the prefill: block 0, then 5 tokens, so the decode needs block 1
    decisions = engine_step(scheduler, teaching)
    assert [type(d).__name__ for d in decisions] == ["Allocated", "Finished", "Freed"]
    assert decisions[0] == Allocated(0, [1], [], 0, 0)
    assert decisions[2] == Freed(0, [0, 1], [1, 0], 2)
    assert said(rec, "BLOCK_ALLOCATE", "BLOCK_FREE")[1:] == [
        ("BLOCK_ALLOCATE", "decode", "decode_needs_new_block",
         dict(seq_id=0, block_ids=[1], shared_block_ids=[], num_free_blocks=0)),
        ("BLOCK_FREE", "postprocess", "finished",
         dict(seq_id=0, block_ids=[0, 1], freed_block_ids=[1, 0], num_free_blocks=2))]
    assert [e.event for e in rec.events][-2:] == ["STATE_TRANSITION", "BLOCK_FREE"]
    assert rec.events[-2].stats["to"] == "FINISHED" and rec.events[-2].reason == "finished_length"
    assert scheduler.is_finished() and scheduler.block_manager.num_free_blocks == 2


# ---- interrupts: an exception at any line of an operation ----------------------------------------------

def _interrupted_operations():
    """(name, set-up, operation) for every operation that changes counts: each set-up returns the block
    manager, the sequences it serves, and the one the operation acts on."""
    def shared_prefix():
        bm, _ = make_bm(8)
        a = make_seq(0, list(range(9)))
        prefill(bm, a)
        return bm, [a], make_seq(1, list(range(8)) + [50, 51])  # 2 cached blocks + 1 fresh

    def two_holders():
        bm, _ = make_bm(8)
        a, b = make_seq(0, list(range(9))), make_seq(1, list(range(8)) + [7])
        prefill(bm, a)
        prefill(bm, b)
        return bm, [a, b], a

    def full_last_block():
        bm, _ = make_bm(8)
        a = make_seq(0, list(range(8)))
        prefill(bm, a)
        a.append_token(99)
        return bm, [a], a

    return [("allocate", shared_prefix, lambda bm, seq: admit(bm, seq)),
            ("deallocate", two_holders, lambda bm, seq: bm.deallocate(seq)),
            ("may_append", full_last_block, lambda bm, seq: bm.may_append(seq))]


@pytest.mark.parametrize("name, set_up, operation", _interrupted_operations(),
                         ids=["allocate", "deallocate", "may_append"])
def test_an_interrupt_at_any_line_leaves_no_negative_count_and_no_half_table(name, set_up, operation):
    """The operation either did not happen or happened, as far as the sequence's table is concerned; the
    worst an interrupt leaves is a block out of every list, and ``BlockManager.rebuild`` (what undoing the
    step does) gives it back."""
    from faults import InjectedFault, LineFault  # tests/faults.py: KeyboardInterrupt at the k-th engine line

    with LineFault() as counter:
        bm, live, seq = set_up()
        before = list(seq.block_table)
    num_lines = counter.count
    with LineFault() as counter:
        bm, live, seq = set_up()
        operation(bm, seq)
    after = list(seq.block_table)
    for at in range(1, counter.count - num_lines + 1):
        bm, live, seq = set_up()
        fault = LineFault(at)
        try:
            with fault:
                operation(bm, seq)
        except InjectedFault:
            pass
        assert all(block.ref_count >= 0 for block in bm.blocks), f"a negative count after {fault.where}"
        assert seq.block_table in (before, after), f"half a table after {fault.where}: {seq.block_table}"
        holders = [s for s in live + [seq] if s.block_table and (s is not seq or name != "deallocate")]
        bm.rebuild(s.block_table for s in dict.fromkeys(holders))
        assert_consistent(bm, *dict.fromkeys(holders))
