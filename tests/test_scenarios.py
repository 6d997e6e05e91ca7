"""The recorded scenarios: the two-request walkthrough on the shipped model (shaped like the reference
nano-vllm run), and the shipped traces in ``traces/`` regenerate to the same events (timings and machine
readings aside)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nanovllm_teach.scenarios import SCENARIOS, WALKTHROUGH_MAX_TOKENS, record
from nanovllm_teach.trace import VOLATILE, load_trace
from nanovllm_teach.trace.schema import HEADER_VOLATILE

TRACES = Path(__file__).resolve().parents[1] / "traces"

def _decisions(trace) -> list[tuple]:
    """Each event without what measures this machine or this moment (the contract's volatile fields)."""
    return [(e.i, e.event, e.phase, e.step, e.reason,
             {k: v for k, v in e.stats.items() if f"{e.event}.{k}" not in VOLATILE}) for e in trace.events]


@pytest.fixture(scope="module")
def walkthrough(tmp_path_factory):
    path = tmp_path_factory.mktemp("walk") / "walkthrough.jsonl"
    outputs = record("walkthrough", path)
    return load_trace(path), outputs


def test_walkthrough_shape(walkthrough):
    trace, outputs = walkthrough
    enqueues = trace.events_named("REQUEST_ENQUEUE")
    assert [e.stats["seq_id"] for e in enqueues] == [0, 1]
    prompt_lens = [e.stats["prompt_len"] for e in enqueues]

    steps = trace.steps
    first = steps[0]
    assert first.phase == "prefill" and first.batch_size == 2
    assert first.num_tokens_stat == sum(prompt_lens) + 2  # each sequence already holds its first token

    finish = {r.seq_id: r for r in trace.requests}
    early, late = sorted(finish.values(), key=lambda r: r.finish_step)
    # As in the reference nano-vllm run: one request finishes on EOS, the batch falls from 2 to 1, and the
    # other is cut at max_tokens.
    assert early.finish_reason == "eos" and early.finish_step < late.finish_step
    assert late.finish_reason == "length" and late.num_completion_tokens == WALKTHROUGH_MAX_TOKENS
    decode = steps[1:]
    assert all(s.phase == "decode" for s in decode)
    assert {s.batch_size for s in decode if s.step <= early.finish_step} == {2}
    assert {s.batch_size for s in decode if s.step > early.finish_step} == {1}

    done = trace.events_named("GENERATE_FINISH")[0].stats
    assert done["total_steps"] == done["prefill_steps"] + done["decode_steps"] == len(steps)
    assert done["prefill_steps"] == 1
    assert sorted(o["finish_reason"] for o in outputs) == ["eos", "length"]
    assert trace.header["workload"] == trace.header["scenario"] == "walkthrough"


@pytest.mark.parametrize("name", ["walkthrough", "preemption", "prefix_cache", "chunked_prefill"])
def test_shipped_trace_regenerates(tmp_path, name):
    shipped = TRACES / f"{name}.jsonl"
    fresh = tmp_path / f"{name}.jsonl"
    record(name, fresh)
    a, b = load_trace(shipped), load_trace(fresh)
    machine = {key.removeprefix("config.") for key in HEADER_VOLATILE if key.startswith("config.")}
    assert {k: v for k, v in a.header["config"].items() if k not in machine} == \
        {k: v for k, v in b.header["config"].items() if k not in machine}
    assert _decisions(a) == _decisions(b), f"regenerating {name} changed the engine's decisions"


def test_every_scenario_has_a_shipped_trace_under_5mb():
    for name in SCENARIOS:
        path = TRACES / f"{name}.jsonl"
        assert path.is_file(), f"traces/{name}.jsonl is missing: run `nanovllm-teach record {name} --out-dir traces`"
        assert path.stat().st_size < 5e6


def test_scenario_lessons_show_in_their_traces():
    preempt = load_trace(TRACES / "preemption.jsonl")
    assert preempt.events_named("PREEMPT")
    hits = load_trace(TRACES / "prefix_cache.jsonl")
    assert hits.events_named("PREFIX_CACHE_HIT")
    chunked = load_trace(TRACES / "chunked_prefill.jsonl")
    assert any(s.chunked for s in chunked.steps)
    static = load_trace(TRACES / "static_arrivals.jsonl")
    continuous = load_trace(TRACES / "continuous_arrivals.jsonl")
    assert len(static.steps) > len(continuous.steps)
