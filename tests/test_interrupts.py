"""Interrupts and faults: whatever line a ``KeyboardInterrupt`` (or a failing sink, or a full disk) hits,
the engine either resumes to the tokens of an uninterrupted run or, after a failed ``generate()``, is empty
with every KV block free. The injectors are in ``faults.py``; ``benchmarks/bench_faults.py`` runs the same
trials by the hundred.

The engine is tight on purpose (12 blocks of 8 tokens, 16 tokens per step, 4 sequences per batch): the
workload is chunked, shares a prefix, and is preempted, so every path of the scheduler is exposed.
"""

from __future__ import annotations

import errno
import resource
import signal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checkpoints import make_random_checkpoint
from faults import InjectedFault, LineFault, NoFault, SinkFault, assert_consistent, assert_empty, step_loop
from nanovllm_teach import LLM, SamplingParams
from nanovllm_teach.engine.sequence import SequenceStatus
from nanovllm_teach.trace import RecordingStopped, TraceRecorder

SETTINGS = dict(kvcache_block_size=8, num_kvcache_blocks=12, max_num_batched_tokens=16, max_model_len=128,
                max_num_seqs=4)
SHARED = list(range(40, 56))  # two full blocks every prompt starts with: prefix-cache hits
PROMPTS = [SHARED + [7, 8, 9], SHARED + list(range(100, 120)), [3] * 30, SHARED + [200, 201]]
PARAMS = [SamplingParams(temperature=0, max_tokens=n, ignore_eos=True) for n in (20, 14, 24, 9)]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    # Decisive logits (see test_engine_properties): a lost or stale K/V row changes the greedy tokens.
    return make_random_checkpoint(tmp_path_factory.mktemp("interrupts"), tie_word_embeddings=False,
                                  initializer_range=0.3, seed=5)


@pytest.fixture(scope="module")
def sink() -> SinkFault:
    return SinkFault()


@pytest.fixture(scope="module")
def llm(checkpoint, sink) -> LLM:
    return LLM(checkpoint, trace=TraceRecorder(keep_in_memory=False, sinks=[sink]), **SETTINGS)


@pytest.fixture(scope="module")
def expected(llm) -> list[list[int]]:
    return _generate(llm)


def _generate(llm: LLM) -> list[list[int]]:
    return [out["token_ids"] for out in llm.generate(PROMPTS, PARAMS, use_tqdm=False)]


def test_the_workload_is_preempted_chunked_and_cached(checkpoint):
    rec = TraceRecorder()
    LLM(checkpoint, trace=rec, **SETTINGS).generate(PROMPTS, PARAMS, use_tqdm=False)
    seen = {e.event for e in rec.events}
    assert {"PREEMPT", "PREFIX_CACHE_HIT"} <= seen
    assert any(any(e.stats["chunked"]) for e in rec.events if e.event == "SCHEDULE_PREFILL")


def test_interrupt_from_a_sink_at_any_event_leaves_the_engine_empty(llm, sink, expected):
    sink.arm(None)
    _generate(llm)
    num_events = sink.count
    for at in range(1, num_events + 1, max(1, num_events // 12)):
        sink.arm(at)
        with pytest.raises(InjectedFault):
            _generate(llm)
        sink.disarm()
        assert_empty(llm)
        assert _generate(llm) == expected, f"after an interrupt at event {at} ({sink.where})"


def test_interrupt_at_any_engine_line_leaves_the_engine_empty(llm, expected):
    with LineFault() as counter:
        _generate(llm)
    for at in range(1, counter.count + 1, max(1, counter.count // 12)):
        fault = LineFault(at)
        with pytest.raises(InjectedFault), fault:
            _generate(llm)
        assert_empty(llm)
        assert _generate(llm) == expected, f"after an interrupt at {fault.where}"


def test_interrupted_prefill_in_a_step_loop_resumes_to_the_same_tokens(llm, expected, monkeypatch):
    """The prefill that completes a prompt (its sequence is already RUNNING) is interrupted in the model."""
    real_run = llm.model_runner.run
    interrupted = []

    def interrupted_run(batch):
        seqs = [llm.scheduler.accepted[seq_id] for seq_id in batch.seq_ids]
        if batch.is_prefill and not interrupted and any(seq.status == SequenceStatus.RUNNING for seq in seqs):
            interrupted.append(batch.seq_ids)
            raise InjectedFault("Ctrl-C inside the model's prefill")
        return real_run(batch)

    monkeypatch.setattr(llm.model_runner, "run", interrupted_run)
    ids = [llm.add_request(p, sp) for p, sp in zip(PROMPTS, PARAMS)]
    outputs = {}
    while not llm.is_finished():
        try:
            outputs.update(llm.step()[0])
        except InjectedFault:
            assert_consistent(llm)
    assert interrupted
    assert [outputs[i] for i in ids] == expected
    assert_empty(llm)


def test_interrupt_at_any_line_of_a_step_loop_resumes_to_the_same_tokens(llm, expected):
    counter = LineFault()
    assert step_loop(llm, PROMPTS, PARAMS, fault=counter) == (expected, 0)
    for at in range(1, counter.count + 1, max(1, counter.count // 10)):
        fault = LineFault(at)
        outputs, interrupts = step_loop(llm, PROMPTS, PARAMS, fault=fault)
        assert interrupts == 1
        assert outputs == expected, f"after an interrupt at {fault.where}"
        assert_empty(llm)


def test_full_disk_while_tracing_stops_recording_and_the_run_goes_on(checkpoint, expected, tmp_path):
    """The recorder's policy: a file error stops recording with one warning; the engine is not touched."""
    path = tmp_path / "run.jsonl"
    llm = LLM(checkpoint, trace=path, **SETTINGS)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (path.stat().st_size + 20_000, hard))
    try:
        with pytest.warns(RecordingStopped, match="File too large"):
            outputs = _generate(llm)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    assert outputs == expected
    assert isinstance(llm.rec.stopped_by, OSError) and llm.rec.stopped_by.errno == errno.EFBIG
    assert_empty(llm)
    assert _generate(llm) == expected


def test_generate_refuses_to_start_while_add_request_requests_are_queued(llm, expected):
    first, second = llm.add_request([1, 2, 3]), llm.add_request([4, 5])
    with pytest.raises(ValueError, match=rf"seq_ids \[{first}, {second}\].*abort_request"):
        llm.generate(PROMPTS, PARAMS, use_tqdm=False)
    assert sorted(llm.scheduler.accepted) == [first, second]  # generate() enqueued nothing of its own
    assert llm.abort_request(first) and llm.abort_request(second)
    assert_empty(llm)
    assert _generate(llm) == expected


def test_abort_request_frees_exactly_its_blocks_and_is_idempotent(llm, expected):
    ids = [llm.add_request(p, sp) for p, sp in zip(PROMPTS, PARAMS)]
    for _ in range(3):
        llm.step()
    assert llm.abort_request(ids[1]) is True
    assert llm.abort_request(ids[1]) is False  # already gone: nothing to do
    assert llm.abort_request(10**9) is False
    assert_consistent(llm)
    outputs = {}
    while not llm.is_finished():
        outputs.update(llm.step()[0])
    assert ids[1] not in outputs
    assert [outputs[i] for i in ids if i != ids[1]] == [e for i, e in zip(ids, expected) if i != ids[1]]
    assert_empty(llm)


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_faults_in_random_workloads(llm, sink, data):
    """Hypothesis draws the workload and where the fault lands (a line or a sink event, in ``generate()``
    or in a step loop); after each fault the engine is empty or resumes to the uninterrupted tokens."""
    token = st.integers(0, 383)
    prompts = [data.draw(st.lists(token, min_size=1, max_size=40)) for _ in range(data.draw(st.integers(1, 4)))]
    params = [SamplingParams(temperature=0, max_tokens=data.draw(st.integers(1, 16)), ignore_eos=True)
              for _ in prompts]
    with LineFault() as counter:
        sink.arm(None)
        want = [o["token_ids"] for o in llm.generate(prompts, params, use_tqdm=False)]
    # Where the fault lands, as a fraction of the run: the number of lines and events depends on what the
    # prefix cache holds from earlier examples, and a draw must not.
    where = data.draw(st.floats(0, 1), label="where, as a fraction of the run")
    by_line = data.draw(st.booleans(), label="line fault (else sink)")
    fault = LineFault(1 + int(where * (counter.count - 1))) if by_line else None
    if not by_line:
        sink.arm(1 + int(where * (sink.count - 1)))
    if data.draw(st.booleans(), label="in generate (else step loop)"):
        try:
            with fault or NoFault():
                got = [o["token_ids"] for o in llm.generate(prompts, params, use_tqdm=False)]
        except InjectedFault:
            sink.disarm()
            assert_empty(llm)
            got = [o["token_ids"] for o in llm.generate(prompts, params, use_tqdm=False)]
    else:
        try:
            got, _ = step_loop(llm, prompts, params, fault=fault)
        finally:
            sink.disarm()
    assert got == want
    assert_empty(llm)


@pytest.mark.parametrize("interrupt_at", [5, 9])  # a prefill that admits, a decode that takes a new block
def test_trace_of_a_rolled_back_step_replays_consistently(checkpoint, interrupt_at, monkeypatch):
    """The rollback reports the blocks that changed hands, so replaying the trace's block events still
    gives every step's and every event's block counts."""
    from nanovllm_teach.trace.reader import Trace
    from nanovllm_teach.trace import check_consistency

    rec = TraceRecorder()
    llm = LLM(checkpoint, trace=rec, **SETTINGS)
    real_run = llm.model_runner.run
    calls = []

    def interrupted_run(batch):
        calls.append(batch.is_prefill)
        if len(calls) == interrupt_at:
            raise InjectedFault("Ctrl-C inside the model")
        return real_run(batch)

    monkeypatch.setattr(llm.model_runner, "run", interrupted_run)
    outputs, interrupts = step_loop(llm, PROMPTS, PARAMS)
    assert interrupts == 1
    assert any(e.reason == "step_rolled_back" for e in rec.events), "the interrupted step had taken blocks"
    assert check_consistency(Trace.from_recorder(rec)) == []
    assert_empty(llm)
