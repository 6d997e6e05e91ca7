"""The engine state the widgets replay from a trace (``nanovllm_teach.trace.state`` and ``replay``), checked against the
real engine: while recording, a probe reads the scheduler's queues and the block manager's blocks at the
end of every step, and the replay must rebuild exactly that from the events alone.

This module also records the traces the other ``test_viz_*`` modules draw (``viz_traces``), once per
test session, on a random tiny checkpoint whose EOS token is made likely, so that some requests finish
on EOS and others on max_tokens:

- ``rich``: continuous batching with everything a picture must show: a prompt chunked over two steps, a
  shared 32-token prefix (prefix-cache hits), a KV cache too small for everyone (preemptions), requests
  arriving over time, finishes on EOS and on max_tokens;
- ``rich_nocache``: the same with prefix caching off;
- ``static`` / ``continuous``: one workload with arrivals under both policies, max_tokens from 4 to 30
  (early finishers), four slots, a generous KV cache and token budget.
"""

from __future__ import annotations

import functools
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from nanovllm_teach.trace import Trace, TraceEvent, TraceRecorder, check_consistency, load_trace
from nanovllm_teach.trace.replay import EngineReplay, kv_snapshot, queues
from nanovllm_teach.trace.segments import held_segments, request_segments, static_batches
from nanovllm_teach.trace.state import walk

VOCAB = 384
EOS_BOOST = 12.0  # the EOS row of the tied embedding, scaled: greedy never picks it, sampling often does


@dataclass
class Truth:
    """What the engine itself held at the end of each step."""

    waiting: dict[int, list[int]] = field(default_factory=dict)
    running: dict[int, list[int]] = field(default_factory=dict)
    holders: dict[int, dict[int, int]] = field(default_factory=dict)  # step -> {block: ref_count}
    hashed_free: dict[int, set[int]] = field(default_factory=dict)  # free blocks that keep their hash
    findable_free: dict[int, set[int]] = field(default_factory=dict)  # ... that the hash table still finds


@dataclass
class Recorded:
    path: Path
    truth: Truth


def make_eos_checkpoint(path: Path) -> Path:
    import torch
    from safetensors.torch import load_file, save_file

    from checkpoints import make_random_checkpoint

    make_random_checkpoint(path, vocab_size=VOCAB)
    weights_file = next(path.glob("*.safetensors"))
    weights = load_file(weights_file)
    eos = 2  # <|im_end|>, the checkpoint's EOS (see checkpoints.SPECIAL)
    with torch.no_grad():
        weights["model.embed_tokens.weight"][eos] *= EOS_BOOST
    save_file(weights, weights_file, metadata={"format": "pt"})
    return path


def record(checkpoint: Path, path: Path, prompts: list[list[int]], params: list[Any], arrival_steps: list[int],
           **settings: Any) -> Recorded:
    """Run one generate() call while recording, with a probe that reads the engine at each STEP_DONE."""
    import torch

    from nanovllm_teach import LLM
    from nanovllm_teach.engine.block_manager import NO_HASH

    truth = Truth()
    engine: list[Any] = []

    def probe(event: TraceEvent) -> None:
        if event.event != "STEP_DONE":
            return
        scheduler = engine[0].scheduler
        bm = scheduler.block_manager
        step = event.step
        truth.waiting[step] = [s.seq_id for s in scheduler.waiting]
        truth.running[step] = [s.seq_id for s in scheduler.running]
        truth.holders[step] = {b.block_id: b.ref_count for b in bm.blocks if b.ref_count > 0}
        free_hashed = [b for b in bm.blocks if b.ref_count == 0 and b.hash != NO_HASH]
        truth.hashed_free[step] = {b.block_id for b in free_hashed}
        truth.findable_free[step] = {b.block_id for b in free_hashed if bm.hash_to_block_id.get(b.hash) == b.block_id}

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matmuls: one thread beats fighting other processes for the cores
    try:
        llm = LLM(checkpoint, trace=TraceRecorder(path, keep_in_memory=False, sinks=[probe]),
                  **{"kvcache_block_size": 16, "max_model_len": 256, **settings})
        engine.append(llm)
        try:
            llm.generate(prompts, params, use_tqdm=False, arrival_steps=arrival_steps)
        finally:
            llm.close()
    finally:
        torch.set_num_threads(threads)
    return Recorded(path, truth)


def _rich(checkpoint: Path, path: Path, **settings: Any) -> Recorded:
    from nanovllm_teach import SamplingParams

    rng = random.Random(0)
    prefix = [rng.randrange(3, VOCAB) for _ in range(32)]  # two full blocks every request but one shares
    prompts = [prefix + [rng.randrange(3, VOCAB) for _ in range(rng.randint(4, 20))] for _ in range(6)]
    prompts.insert(1, [rng.randrange(3, VOCAB) for _ in range(100)])  # 100 tokens, budget 64: two chunks
    # Seeds 2-8: their draws finish requests on both EOS and max_tokens and preempt 3 times (2 without prefix
    # caching) in these 14 blocks; the checks in ``viz_traces`` say so if a change of the sampler loses that.
    params = [SamplingParams(temperature=1.0, max_tokens=rng.randint(10, 40), seed=2 + i) for i in range(len(prompts))]
    return record(checkpoint, path, prompts, params, [0, 0, 0, 2, 6, 12, 20], max_num_batched_tokens=64,
                  num_kvcache_blocks=14, max_num_seqs=4, **settings)


def _arrivals(checkpoint: Path, path: Path, policy: str) -> Recorded:
    from nanovllm_teach import SamplingParams

    rng = random.Random(1)
    prompts = [[rng.randrange(3, VOCAB) for _ in range(rng.randint(10, 30))] for _ in range(8)]
    params = [SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True) for n in (4, 30, 12, 24, 8, 16, 28, 6)]
    return record(checkpoint, path, prompts, params, [0, 0, 0, 0, 3, 5, 9, 14], max_num_batched_tokens=512,
                  num_kvcache_blocks=64, max_num_seqs=4, scheduling_policy=policy)


@functools.cache
def viz_traces(base: Path) -> dict[str, Recorded]:
    """The traces of the viz tests, recorded once per session under ``base`` (see the module docstring)."""
    root = base / "viz_traces"
    root.mkdir(parents=True, exist_ok=True)
    checkpoint = make_eos_checkpoint(root / "checkpoint")
    recorded = {
        "rich": _rich(checkpoint, root / "rich.jsonl"),
        "rich_nocache": _rich(checkpoint, root / "rich_nocache.jsonl", enable_prefix_caching=False),
        "static": _arrivals(checkpoint, root / "static.jsonl", "static"),
        "continuous": _arrivals(checkpoint, root / "continuous.jsonl", "continuous"),
    }
    rich = load_trace(recorded["rich"].path)
    # The pictures' tests rely on these; if a change of the engine or the checkpoint loses one, say so.
    reasons = {r.finish_reason for r in rich.requests}
    assert {"eos", "length"} <= reasons, f"the rich trace should finish on both EOS and max_tokens: {reasons}"
    assert any(row.chunked for row in rich.steps), "the rich trace should chunk a prompt"
    assert any(row.preempted for row in rich.steps), "the rich trace should preempt"
    assert any(row.prefix_hit_seq_ids for row in rich.steps), "the rich trace should hit the prefix cache"
    return recorded


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict[str, Recorded]:
    return viz_traces(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def traces(recorded) -> dict[str, Trace]:
    return {name: load_trace(rec.path) for name, rec in recorded.items()}


NAMES = ("rich", "rich_nocache", "static", "continuous")


@pytest.mark.parametrize("name", NAMES)
def test_recorded_traces_are_consistent(traces, name):
    assert check_consistency(traces[name]) == []


@pytest.mark.parametrize("name", NAMES)
def test_replay_rebuilds_the_engine_at_every_step(recorded, traces, name):
    trace, truth = traces[name], recorded[name].truth
    replay = EngineReplay(trace, keyframe_every=5)
    assert replay.steps == sorted(truth.waiting)
    for step in replay.steps:
        state = replay.state_at(step)
        q, kv = queues(state), kv_snapshot(state, replay.num_blocks)
        assert list(q.waiting) == truth.waiting[step], f"step {step}"
        assert list(q.running) == truth.running[step], f"step {step}"
        assert {b: len(seqs) for b, seqs in kv.holders.items()} == truth.holders[step], f"step {step}"
        # Which free blocks keep a hash: exact. Which of them the hash table still finds: a subset.
        assert set(kv.cached_free) == truth.hashed_free[step], f"step {step}"
        assert truth.findable_free[step] <= kv.cached_free


def test_prefix_caching_off_leaves_nothing_cached(traces):
    trace = traces["rich_nocache"]
    assert trace.settings.enable_prefix_caching is False
    replay = EngineReplay(trace)
    assert all(not replay.kv_at(step).cached_free for step in replay.steps)
    with_cache = EngineReplay(traces["rich"])
    assert any(with_cache.kv_at(step).cached_free for step in with_cache.steps)


def test_every_prefix_hit_is_on_a_block_the_replay_calls_hashed(traces):
    trace = traces["rich"]
    hashed_before: set[int] = set()  # the state's hashed blocks just before each event
    hits = 0
    for e, state in walk(trace.events, trace.settings):
        if e.event == "PREFIX_CACHE_HIT":
            for block_id in e.stats.block_ids:
                assert block_id in hashed_before, f"event {e.i}: hit on block {block_id}"
                hits += 1
        hashed_before = set(state.hashed)
    assert hits > 0


def test_random_access_equals_walking_through(traces):
    trace = traces["rich"]
    walker = EngineReplay(trace, keyframe_every=1)
    jumper = EngineReplay(trace, keyframe_every=7)
    for step in reversed(walker.steps):  # backwards: every jump goes to an earlier keyframe
        assert jumper.kv_at(step) == walker.kv_at(step)
        assert jumper.queues_at(step) == walker.queues_at(step)
    with pytest.raises(KeyError, match="no STEP_DONE"):
        walker.state_at(10_000)


def test_segments_follow_the_schedule(traces):
    trace = traces["rich"]
    segments = request_segments(trace)
    prefill_chunks = {(sid, e.step) for e in trace.events_named("SCHEDULE_PREFILL") for sid in e.stats["seq_ids"]}
    decode_steps = {(sid, e.step) for e in trace.events_named("SCHEDULE_DECODE") for sid in e.stats["seq_ids"]}
    prefill = [s for s in segments if s.state == "prefill"]
    assert {(s.seq_id, s.step_start) for s in prefill} == prefill_chunks
    assert all(s.step_end == s.step_start + 1 for s in prefill)
    assert {(s.seq_id, step) for s in segments if s.state == "decode"
            for step in range(s.step_start, s.step_end)} == decode_steps
    # The chunked prompt: a partial chunk, then the rest, in consecutive steps.
    chunked = next(s for s in prefill if s.partial)
    rest = next(s for s in prefill if s.seq_id == chunked.seq_id and s.step_start == chunked.step_end)
    assert not rest.partial and chunked.tokens + rest.tokens == next(
        r.prompt_len for r in trace.requests if r.seq_id == chunked.seq_id)
    # A preempted request waits in the "preempted" state from its preemption to its next prefill.
    for e in trace.events_named("PREEMPT"):
        seg = next(s for s in segments if s.seq_id == e.stats["seq_id"] and s.step_start == e.step)
        assert seg.state == "preempted"
        assert any(s.state == "prefill" and s.seq_id == seg.seq_id and s.step_start == seg.step_end for s in segments)
    # Per request, the segments tile the steps from arrival to finish without gap or overlap.
    for req in trace.requests:
        own = sorted((s for s in segments if s.seq_id == req.seq_id), key=lambda s: s.step_start)
        assert own[0].step_start == req.enqueue_step and own[-1].step_end == req.finish_step + 1
        assert all(a.step_end == b.step_start for a, b in zip(own, own[1:]))


def test_static_batches_and_held_slots(traces):
    static, continuous = traces["static"], traces["continuous"]
    batches = static_batches(static)
    assert [b.members for b in batches] == [(0, 1, 2, 3), (4, 5, 6, 7)]
    finish = {r.seq_id: r.finish_step for r in static.requests}
    for batch in batches:
        assert batch.last_step == max(finish[s] for s in batch.members)
        assert batch.first_step == min(r.first_scheduled_step for r in static.requests if r.seq_id in batch.members)
    held = held_segments(static)
    assert {(s.seq_id, s.step_start, s.step_end) for s in held} == {
        (sid, finish[sid] + 1, b.last_step + 1) for b in batches for sid in b.members if finish[sid] < b.last_step}
    assert held_segments(continuous) == []
