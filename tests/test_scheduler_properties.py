"""Property tests of the ``Scheduler`` (with its ``BlockManager``) driven without a model.

A ``FakeModel`` stands in for the model runner. It keeps a fake paged KV cache: the "K/V" it writes for
position ``p`` of a sequence is a digest of that sequence's tokens ``0..p`` (real K/V depends on the whole
prefix too), and before computing a step it reads every earlier position back through the block table and
checks the digest. So a block handed to two sequences that do not share that prefix, a block reused while
still referenced, a prefix-cache hit on the wrong content, or a chunk that skips or repeats positions all
fail loudly. The token it returns is a deterministic function of the context (some requests are told to
emit EOS early), so any correct schedule must produce exactly the tokens of an unconstrained run.

Hypothesis draws the workload (number of requests, prompt lengths up to several blocks, shared prefixes,
duplicates, max_tokens, ignore_eos, arrival while the engine runs) and tight budgets (a KV cache just big
enough for the largest request's worst case, a small token budget that forces chunked prefill, a small
``max_num_seqs``, block sizes 1..16), under both policies, with prefix caching on and off.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from dataclasses import dataclass

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from nanovllm_teach.engine.block_manager import NO_HASH
from nanovllm_teach.engine.batch import ScheduledBatch
from nanovllm_teach.engine.decisions import Allocated, Finished, Freed, Preempted
from nanovllm_teach.engine.scheduler import Scheduler
from nanovllm_teach.engine.sequence import Sequence, SequenceStatus
from nanovllm_teach.sampling_params import SamplingParams

EOS = 0
VOCAB = 50  # the fake model samples from 1..VOCAB-1, plus EOS when a request is told to stop


# ---- the fake model ----------------------------------------------------------------------------------


def prefix_digests(token_ids: list[int]) -> list[int]:
    """``d[p]`` names the prefix ``token_ids[:p + 1]``: the fake K/V of position ``p``."""
    out, d = [], 0
    for t in token_ids:
        d = hash((d, t))
        out.append(d)
    return out


def next_token(num_completion_tokens: int, eos_after: int | None, last_digest: int) -> int:
    """The fake model's greedy choice: EOS as the ``eos_after``-th completion token (0-based), otherwise
    a token determined by the whole context."""
    if eos_after is not None and num_completion_tokens == eos_after:
        return EOS
    return 1 + last_digest % (VOCAB - 1)


class FakeModel:
    """Stands in for ``ModelRunner.run``: one token per scheduled sequence, with a checked fake KV cache."""

    def __init__(self, block_size: int, eos_after: dict[int, int | None]) -> None:
        self.block_size = block_size
        self.eos_after = eos_after
        self.kv: dict[int, int] = {}  # slot -> digest of the prefix whose last position it holds

    def run(self, batch: ScheduledBatch, seqs: list[Sequence]) -> list[int]:
        """``seqs``: the scheduler's own sequences, to check that the batch says what they hold."""
        bs = self.block_size
        token_ids = []
        for entry, seq in zip(batch.seqs, seqs, strict=True):
            start, end = entry.num_cached_tokens, entry.context_len
            assert (entry.seq_id, entry.num_tokens, entry.block_table) == (seq.seq_id, seq.num_tokens, seq.block_table)
            assert entry.token_ids == seq.token_ids[start:end]
            if batch.is_prefill:
                assert start < end <= seq.num_tokens, f"bad prefill range {start}..{end} for {seq}"
            else:
                assert len(entry.token_ids) == 1 and end == seq.num_tokens, f"bad decode of {seq}"
            assert len(seq.block_table) == seq.num_blocks, f"{seq} lacks blocks for its tokens"
            digests = prefix_digests(seq.token_ids[:end])
            for p in range(end):
                slot = seq.block_table[p // bs] * bs + p % bs
                if p < start:
                    assert self.kv.get(slot) == digests[p], (
                        f"seq {seq.seq_id} position {p}: the cache holds K/V of another prefix")
                else:
                    self.kv[slot] = digests[p]
            if end < seq.num_tokens:
                token_ids.append(EOS)  # a prompt chunk's sample is garbage: the scheduler must drop it
            else:
                token_ids.append(next_token(seq.num_completion_tokens, self.eos_after[seq.seq_id], digests[-1]))
        return token_ids


# ---- workloads ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    prompt: tuple[int, ...]
    max_tokens: int
    ignore_eos: bool
    eos_after: int | None
    arrival: int  # the number of engine steps already run when it is added


@dataclass(frozen=True)
class Budget:
    policy: str
    enable_prefix_caching: bool
    block_size: int
    num_kvcache_blocks: int
    max_num_batched_tokens: int
    max_num_seqs: int
    max_model_len: int


def worst_case_blocks(req: Request, block_size: int, max_model_len: int) -> int:
    """What the engine's admission check charges a request: its longest possible length in blocks."""
    return -(-min(len(req.prompt) + req.max_tokens, max_model_len) // block_size)


@st.composite
def workloads(draw) -> tuple[list[Request], Budget]:
    block_size = draw(st.integers(1, 16), label="block_size")
    # A few shared "system prompts" of 0 to ~3 blocks; suffixes from a tiny alphabet make duplicates likely.
    prefixes = [draw(st.lists(st.integers(1, VOCAB - 1), min_size=n, max_size=n))
                for n in draw(st.lists(st.integers(0, 3 * block_size + 2), min_size=1, max_size=3))]
    requests = []
    for _ in range(draw(st.integers(1, 10), label="num_requests")):
        prefix = draw(st.sampled_from(prefixes))
        suffix = draw(st.lists(st.integers(1, 3), min_size=1, max_size=20))
        max_tokens = draw(st.integers(1, 24))
        eos_after = draw(st.none() | st.integers(0, max_tokens))
        arrival = draw(st.just(0) | st.integers(1, 30))
        requests.append(Request(tuple(prefix + suffix)[:64], max_tokens, draw(st.booleans()), eos_after, arrival))
    longest_prompt = max(len(r.prompt) for r in requests)
    max_model_len = longest_prompt + draw(st.integers(0, 12), label="max_model_len slack")
    biggest = max(worst_case_blocks(r, block_size, max_model_len) for r in requests)
    budget = Budget(
        policy=draw(st.sampled_from(["continuous", "static"])),
        enable_prefix_caching=draw(st.booleans()),
        block_size=block_size,
        num_kvcache_blocks=biggest + draw(st.sampled_from([0, 0, 1, 3]), label="spare blocks"),
        max_num_batched_tokens=draw(st.integers(2, 40) | st.integers(1, 3), label="max_num_batched_tokens"),
        max_num_seqs=draw(st.integers(1, 4), label="max_num_seqs"),
        max_model_len=max_model_len,
    )
    return requests, budget


UNCONSTRAINED = dict(policy="continuous", enable_prefix_caching=False, num_kvcache_blocks=10_000,
                     max_num_batched_tokens=100_000, max_num_seqs=1_000)


# ---- invariants --------------------------------------------------------------------------------------


def check_blocks(sched: Scheduler, seqs: list[Sequence]) -> None:
    """The block manager's books agree with the sequences' block tables."""
    bm = sched.block_manager
    live = list(sched.waiting) + list(sched.running)
    assert len({s.seq_id for s in live}) == len(live), "a sequence is queued twice"
    for seq in seqs:
        if seq.is_finished:
            assert not seq.block_table and seq not in live, f"finished {seq} still holds blocks or a queue slot"
    holders = Counter(b for seq in live for b in seq.block_table)
    for block in bm.blocks:
        assert block.ref_count == holders[block.block_id], (
            f"block {block.block_id}: ref_count {block.ref_count}, held by {holders[block.block_id]} tables")
    free = list(bm.free_block_ids)
    assert len(free) == len(set(free)), "a block is twice in the free list"
    assert not set(free) & bm.used_block_ids, "a block is both free and used"
    assert set(free) | bm.used_block_ids == set(range(bm.num_blocks)), "a block is neither free nor used"
    assert bm.used_block_ids == set(holders), "the used set is not the set of held blocks"
    for h, block_id in bm.hash_to_block_id.items():
        assert bm.blocks[block_id].hash == h
    # A block in two tables is a named (hashed) prefix block at the same index, with both prefixes equal.
    position: dict[int, tuple[int, Sequence]] = {}
    for seq in live:
        assert len(set(seq.block_table)) == len(seq.block_table), f"{seq} holds a block twice"
        for i, block_id in enumerate(seq.block_table):
            block = bm.blocks[block_id]
            if block.hash != NO_HASH:
                assert block.token_ids == seq.block(i), f"{seq} block {i} names other tokens"
            if block_id in position:
                j, other = position[block_id]
                assert block.hash != NO_HASH, f"unnamed block {block_id} shared by {other} and {seq}"
                assert i == j and seq.token_ids[:(i + 1) * bm.block_size] == other.token_ids[:(i + 1) * bm.block_size]
            position[block_id] = (i, seq)


def check_queues(sched: Scheduler) -> None:
    """Waiting sequences hold no blocks except a chunked queue head; running ones have computed all but
    their newest token and hold the blocks for it, or are one block short until their next decode."""
    for k, seq in enumerate(sched.waiting):
        assert seq.status == SequenceStatus.WAITING
        if k == 0 and seq.block_table:
            assert len(seq.block_table) == seq.num_blocks and 0 < seq.num_cached_tokens < seq.num_tokens
        else:
            assert not seq.block_table and seq.num_cached_tokens == 0, f"waiting {seq} holds blocks"
    for seq in sched.running:
        assert seq.status == SequenceStatus.RUNNING
        assert seq.num_cached_tokens == seq.num_tokens - 1
        assert seq.num_blocks - 1 <= len(seq.block_table) <= seq.num_blocks


def check_schedule(sched: Scheduler, budget: Budget, scheduled: list[Sequence], is_prefill: bool,
                   waiting_before: list[Sequence], running_before: list[Sequence]) -> None:
    """One step's batch respects the limits; prefill admits first-come first-served and chunks only
    the queue head; the static policy admits nobody while a batch is in flight."""
    assert 1 <= len(scheduled) <= budget.max_num_seqs
    if is_prefill:
        assert sum(s.num_scheduled_tokens for s in scheduled) <= budget.max_num_batched_tokens
        assert scheduled == waiting_before[:len(scheduled)], "prefill did not take the queue in order"
        chunked = [s for s in scheduled if s.num_cached_tokens + s.num_scheduled_tokens < s.num_tokens]
        if chunked:
            assert scheduled == chunked and sched.waiting[0] is chunked[0], "a chunk that is not the queue head"
        if budget.policy == "static" and running_before:
            assert len(scheduled) == 1 and scheduled[0].block_table and scheduled[0] is waiting_before[0]
            assert scheduled[0].num_cached_tokens > 0, "the static policy admitted into a batch in flight"
    else:
        assert all(s.num_scheduled_tokens == 1 for s in scheduled)
        assert not (sched.waiting and sched.waiting[0].block_table), "decode interrupted a chunked prefill"
        assert set(scheduled) <= set(running_before)
        for seq in set(running_before) - set(sched.running):  # preempted: back to waiting, blocks freed
            assert seq in sched.waiting and not seq.block_table and seq.num_preemptions > 0


# ---- driving the scheduler ---------------------------------------------------------------------------


def run(requests: list[Request], budget: Budget, check: bool = True) -> tuple[list[tuple], Counter]:
    """Serve ``requests`` (each added once ``arrival`` steps have run, or as soon as the engine idles)
    and return each one's ``(completion_token_ids, finish_reason)`` and counts of what happened
    (steps, chunked steps, preemptions, prefix-cache hits)."""
    bs = budget.block_size
    sched = Scheduler(max_num_seqs=budget.max_num_seqs, max_num_batched_tokens=budget.max_num_batched_tokens,
                      max_model_len=budget.max_model_len, eos=EOS, num_kvcache_blocks=budget.num_kvcache_blocks,
                      block_size=bs, enable_prefix_caching=budget.enable_prefix_caching, policy=budget.policy)
    seqs = [Sequence(i, list(r.prompt), SamplingParams(temperature=0.0, max_tokens=r.max_tokens,
                                                        ignore_eos=r.ignore_eos), bs)
            for i, r in enumerate(requests)]
    model = FakeModel(bs, {i: r.eos_after for i, r in enumerate(requests)})
    arrivals = deque(sorted(range(len(requests)), key=lambda i: requests[i].arrival))
    # No livelock: every step appends a token to some sequence, except the chunks of one prompt before its
    # last, which follow each other directly. So steps <= (tokens generated) x (chunks per prompt).
    max_chunks = math.ceil(budget.max_model_len / budget.max_num_batched_tokens)
    step_bound = sum(r.max_tokens for r in requests) * max_chunks
    stats: Counter = Counter()
    steps = 0
    while arrivals or not sched.is_finished():
        while arrivals and (requests[arrivals[0]].arrival <= steps or sched.is_finished()):
            sched.add(seqs[arrivals.popleft()])
        waiting_before, running_before = list(sched.waiting), list(sched.running)
        had_blocks = {s for s in waiting_before + running_before if s.block_table}
        batch, decisions = sched.schedule()
        scheduled, is_prefill = [sched.accepted[i] for i in batch.seq_ids], batch.is_prefill
        admitted = [s for s in scheduled if is_prefill and s not in had_blocks]
        stats["prefix-cache hits"] += sum(s.num_cached_tokens > 0 for s in admitted)
        stats["chunked steps"] += is_prefill and scheduled[0].status == SequenceStatus.WAITING
        if check:
            check_schedule(sched, budget, scheduled, is_prefill, waiting_before, running_before)
            check_blocks(sched, seqs)
        if check:
            check_decisions(decisions, scheduled, had_blocks, is_prefill, sched)
        finishes = sched.postprocess(batch, model.run(batch, scheduled))
        assert [d.seq_id for d in finishes if isinstance(d, Finished)] == [s.seq_id for s in scheduled if s.is_finished]
        assert [d.seq_id for d in finishes if isinstance(d, Freed)] == [s.seq_id for s in scheduled if s.is_finished]
        steps += 1
        if check:
            check_blocks(sched, seqs)
            check_queues(sched)
        assert steps <= step_bound, f"no progress: {steps} steps for at most {step_bound}"
    bm = sched.block_manager
    assert bm.num_free_blocks == bm.num_blocks and not bm.used_block_ids, "blocks leaked"
    assert all(seq.is_finished for seq in seqs)
    stats["steps"] = steps
    stats["preemptions"] = sum(seq.num_preemptions for seq in seqs)
    return [(seq.completion_token_ids, seq.finish_reason) for seq in seqs], stats


def check_decisions(decisions: list, scheduled: list[Sequence], had_blocks: set[Sequence], is_prefill: bool,
                    sched: Scheduler) -> None:
    """What ``schedule()`` returned it decided is what happened: a prefill gave blocks to exactly the newly
    admitted sequences, in order; a decode's preempted sequences wait, each after the blocks it gave back."""
    if is_prefill:
        admitted = [s.seq_id for s in scheduled if s not in had_blocks]
        assert [d.seq_id for d in decisions] == admitted and all(isinstance(d, Allocated) for d in decisions)
        return
    for i, decision in enumerate(decisions):
        if isinstance(decision, Preempted):
            assert isinstance(decisions[i - 1], Freed) and decisions[i - 1].seq_id == decision.seq_id
            assert sched.accepted[decision.seq_id].status == SequenceStatus.WAITING
        else:
            assert isinstance(decision, (Allocated, Freed))


def oracle(req: Request, max_model_len: int) -> tuple[list[int], str]:
    """The fake model run on one request alone, with no engine at all."""
    tokens = list(req.prompt)
    while True:
        completion = len(tokens) - len(req.prompt)
        token = next_token(completion, req.eos_after, prefix_digests(tokens)[-1])
        tokens.append(token)
        if not req.ignore_eos and token == EOS:
            return tokens[len(req.prompt):], "eos"
        if completion + 1 == req.max_tokens:
            return tokens[len(req.prompt):], "length"
        if len(tokens) >= max_model_len:
            return tokens[len(req.prompt):], "max_model_len"


# ---- the properties --------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads())
def test_tight_budgets_change_the_schedule_never_the_tokens(case):
    """Under any budget that can hold the largest request, any policy, with or without prefix caching
    and with requests arriving mid-run: every request finishes within the step bound, the block books
    balance after every step (reference counts = holders, free/used partition all blocks, only named
    prefix blocks are shared), no batch breaks a limit, only the queue head is chunked, every block is
    free at the end, and every request's tokens and finish reason equal an unconstrained run's — so
    preemption, chunking and prefix caching never lose, duplicate or corrupt a token."""
    requests, budget = case
    got, stats = run(requests, budget)
    for what, n in stats.items():
        if what != "steps":
            event(f"{what}: {'some' if n else 'none'}")
    reference = Budget(**{**budget.__dict__, **UNCONSTRAINED})
    expected, _ = run([Request(r.prompt, r.max_tokens, r.ignore_eos, r.eos_after, 0) for r in requests],
                      reference, check=False)
    assert expected == [oracle(r, budget.max_model_len) for r in requests]
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g == e, f"request {i} ({requests[i]}) diverged under {budget}"


def test_a_tight_budget_really_preempts_and_chunks():
    """The workload family above does reach the interesting paths: a cache of exactly one request's
    worst case with two long requests forces preemption, a token budget of 3 forces chunking, and a
    shared prefix is reused; the tokens still match the unconstrained run."""
    prompt = tuple(range(1, 21))
    requests = [Request(prompt, 8, True, None, 0), Request(prompt[:16] + (7, 7), 8, True, None, 0),
                Request(prompt, 4, False, 1, 5)]
    budget = Budget("continuous", True, 4, worst_case_blocks(requests[0], 4, 64), 3, 4, 64)
    got, stats = run(requests, budget)
    assert got == [oracle(r, 64) for r in requests]
    assert stats["preemptions"] > 0 and stats["chunked steps"] > 0 and stats["prefix-cache hits"] > 0
