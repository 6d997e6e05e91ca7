"""Loading traces and the tables derived from them, on traces the real engine records.

Scenarios (each recorded once per module, on a tiny random checkpoint): a normal run, a run short of KV
blocks (preemption), a run with a small token budget (chunked prefill), two generate() calls sharing a
prompt prefix (prefix-cache hits), a run interrupted mid-step (aborted requests), and requests arriving
while the engine runs. Bad files are made
by cutting and corrupting a real trace.

``record_trace`` and ``record_scenario(s)`` are also used by the console and Perfetto tests.
"""

from __future__ import annotations

import functools
import json
import random
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from nanovllm_teach.trace import (
    SCHEMA_NAME, SCHEMA_VERSION, Trace, TraceEvent, TraceFormatError, TraceRecorder, check_consistency,
    format_request_table,
    format_step_table, load_trace, replay_blocks, request_spans,
)

VOCAB = 384
SETTINGS = dict(kvcache_block_size=16, max_model_len=256, max_num_batched_tokens=512)


@dataclass
class Recorded:
    path: Path
    recorder: TraceRecorder
    outputs: list[dict[str, Any]]


def random_prompt(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(3, VOCAB) for _ in range(n)]  # ids 0-2 are the special tokens


def record_trace(checkpoint: Path, path: Path, waves: list[list[list[int]]], *, max_tokens: int = 8,
                 sinks: list[Callable] | None = None, interrupt_at_run: int | None = None,
                 arrival_steps: list[int] | None = None, **engine_settings: Any) -> Recorded:
    """Run ``generate()`` once per wave of prompts (greedy, ``ignore_eos``) while recording to ``path``.

    ``arrival_steps``: passed to every generate() call (requests that arrive while the engine runs).

    ``interrupt_at_run``: make the model runner's n-th call raise KeyboardInterrupt (a run cut short).
    """
    import torch
    from nanovllm_teach import LLM, SamplingParams

    # The engine's tiny matmuls run far faster on one thread than fighting other processes for two cores.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        recorder = TraceRecorder(path, sinks=sinks)
        llm = LLM(checkpoint, trace=recorder, **{**SETTINGS, **engine_settings})
        if interrupt_at_run is not None:
            real_run, calls = llm.model_runner.run, [0]

            def run(batch):
                calls[0] += 1
                if calls[0] == interrupt_at_run:
                    raise KeyboardInterrupt
                return real_run(batch)
            llm.model_runner.run = run
        params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
        outputs: list[dict[str, Any]] = []
        try:
            for wave in waves:
                outputs += llm.generate(wave, params, use_tqdm=False, arrival_steps=arrival_steps)
        except KeyboardInterrupt:
            if interrupt_at_run is None:
                raise
        llm.close()
    finally:
        torch.set_num_threads(threads)
    return Recorded(path, recorder, outputs)


SCENARIOS = ("normal", "preemption", "chunked", "prefix", "crashed", "arrivals")


def record_scenario(name: str, checkpoint: Path, root: Path, sinks: list[Callable] | None = None) -> Recorded:
    """Record one scenario into ``root / f"{name}.jsonl"``; its prompts depend on its name only."""
    rng = random.Random(name)
    path = root / f"{name}.jsonl"
    record = functools.partial(record_trace, sinks=sinks)
    if name == "normal":  # 250 prompt tokens + 8 would pass max_model_len=256: that one stops at max_model_len
        return record(checkpoint, path, [[random_prompt(rng, n) for n in (5, 20, 250)]])
    if name == "preemption":  # 6 blocks of 16 cannot hold three sequences of 45-70 tokens
        return record(checkpoint, path, [[random_prompt(rng, n) for n in (25, 32, 50)]], max_tokens=20,
                      num_kvcache_blocks=6)
    if name == "chunked":  # a 70-token prompt through a 32-token budget: chunks of 32, 32, 6
        return record(checkpoint, path, [[random_prompt(rng, 70), random_prompt(rng, 10)]],
                      max_num_batched_tokens=32, max_model_len=128)
    if name == "prefix":  # 40 shared tokens: two full blocks the second generate() call finds cached
        shared = random_prompt(rng, 40)
        return record(checkpoint, path, [[shared + random_prompt(rng, 5)],
                                         [shared + random_prompt(rng, n) for n in (12, 30)]])
    if name == "crashed":  # the model runner fails in step 3: generate() aborts both requests
        return record(checkpoint, path, [[random_prompt(rng, 9), random_prompt(rng, 40)]], interrupt_at_run=3)
    if name == "arrivals":  # the second request arrives after 3 steps, the third after 20 (engine idle by then)
        return record(checkpoint, path, [[random_prompt(rng, n) for n in (10, 20, 30)]], max_tokens=4,
                      arrival_steps=[0, 3, 20])
    raise ValueError(name)


def record_scenarios(root: Path, names: tuple[str, ...] = SCENARIOS) -> dict[str, Recorded]:
    """Record the named scenarios into ``root``, on one random checkpoint."""
    from checkpoints import make_random_checkpoint

    checkpoint = make_random_checkpoint(root / "ckpt", vocab_size=VOCAB)
    return {name: record_scenario(name, checkpoint, root) for name in names}


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict[str, Recorded]:
    return record_scenarios(tmp_path_factory.mktemp("traces"))


@pytest.fixture(scope="module")
def traces(recorded) -> dict[str, Trace]:
    return {name: load_trace(rec.path) for name, rec in recorded.items()}


# ---- loading ------------------------------------------------------------------------------------------


def test_file_and_memory_traces_agree(recorded, traces):
    for name, rec in recorded.items():
        trace = traces[name]
        memory = Trace.from_recorder(rec.recorder)
        assert trace.header == memory.header, name
        assert trace.header["schema"] == SCHEMA_NAME and trace.header["version"] == SCHEMA_VERSION
        assert [e.to_dict() for e in trace.events] == [e.to_dict() for e in memory.events], name
        assert trace.steps == memory.steps and trace.requests == memory.requests, name
        assert trace.path == rec.path


def test_from_recorder_needs_events_in_memory():
    with pytest.raises(ValueError, match="keep_in_memory"):
        Trace.from_recorder(TraceRecorder(keep_in_memory=False))


def test_events_in_step_and_by_name(traces):
    trace = traces["normal"]
    first = trace.events_in_step(1)
    assert first[-1].event == "STEP_DONE" and all(e.step == 1 for e in first)
    assert "SCHEDULE_PREFILL" in [e.event for e in first]
    assert trace.events_in_step(10_000) == []
    assert len(trace.events_named("STEP_DONE")) == len(trace.steps)


# ---- the tables ---------------------------------------------------------------------------------------


def test_every_scenario_is_self_consistent(traces):
    for name, trace in traces.items():
        assert check_consistency(trace) == [], name


def test_consistency_check_catches_tampering(traces):
    original = traces["preemption"]

    def tampered(target: TraceEvent, **stats: Any) -> list[str]:
        """The problems found once ``target``'s stats are overwritten with ``stats``."""
        events = [TraceEvent(**e.to_dict()) for e in original.events]
        events[target.i].stats = {**target.stats, **stats}
        return check_consistency(Trace(original.header, events))

    step_done = original.events_named("STEP_DONE")
    finished = next(e for e in original.events_named("STATE_TRANSITION") if e.stats["to"] == "FINISHED")
    assert any(p.startswith("step 3: replaying the block events gives") for p in tampered(step_done[2], used_blocks=99))
    assert any("STEP_DONE.finished=[7]" in p for p in tampered(step_done[4], finished=[7]))
    assert any("GENERATE_FINISH reports" in p
               for p in tampered(original.events_named("GENERATE_FINISH")[0], total_steps=1))
    assert any("num_free_blocks=42" in p for p in tampered(original.events_named("BLOCK_ALLOCATE")[0],
                                                             num_free_blocks=42))
    assert any(p.startswith(f"seq {finished.stats['seq_id']}: finished with num_completion_tokens=3")
               for p in tampered(finished, num_completion_tokens=3))


def test_block_replay_matches_step_done(traces):
    for name, trace in traces.items():
        replayed = replay_blocks(trace)
        assert [len(replayed[row.step]) for row in trace.steps] == [row.used_blocks for row in trace.steps], name


def test_requests_agree_with_generate_outputs(recorded, traces):
    for name, rec in recorded.items():
        requests = {r.seq_id: r for r in traces[name].requests}
        for out in rec.outputs:
            req = requests[out["seq_id"]]
            assert req.finish_reason == out["finish_reason"], (name, out["seq_id"])
            assert req.num_completion_tokens == len(out["token_ids"]), (name, out["seq_id"])


def test_normal_run_tables(traces):
    trace = traces["normal"]
    steps, requests = trace.steps, trace.requests
    finish = trace.events_named("GENERATE_FINISH")[0].stats
    assert len(steps) == finish["total_steps"]
    assert [r.step for r in steps] == list(range(1, len(steps) + 1))
    first = steps[0]
    assert first.phase == "prefill" and first.batch_size == 3 and first.seq_ids == [0, 1, 2]
    assert first.num_batched_tokens == 5 + 20 + 250
    assert first.num_tokens_stat == (5 + 1) + (20 + 1) + (250 + 1)  # lengths after the first token
    for row in steps[1:]:
        assert row.phase == "decode" and row.num_tokens_stat == -row.batch_size == -row.num_batched_tokens
        assert row.used_blocks + row.free_blocks == steps[0].used_blocks + steps[0].free_blocks
        assert row.t_start_ns < row.t_end_ns and row.latency_ms > 0
    assert [(r.prompt_len, r.finish_reason, r.num_completion_tokens) for r in requests] == [
        (5, "length", 8), (20, "length", 8), (250, "max_model_len", 6)]
    assert steps[5].finished == [2] and steps[-1].finished == [0, 1] and steps[-1].used_blocks == 0
    for r in requests:
        assert r.enqueue_step == r.first_scheduled_step == r.first_token_step == 1
        assert r.enqueue_t_ns <= r.first_scheduled_t_ns < r.first_token_t_ns < r.finish_t_ns
        assert 0 < r.ttft_ms < r.e2e_ms and r.tpot_ms > 0 and r.num_preemptions == 0


def test_preemption_tables(traces):
    trace = traces["preemption"]
    preempting = [row for row in trace.steps if row.preempted]
    assert preempting, "the scenario is meant to run out of KV blocks"
    victims = [sid for row in preempting for sid in row.preempted]
    requests = {r.seq_id: r for r in trace.requests}
    for sid in set(victims):
        assert requests[sid].num_preemptions == victims.count(sid)
        states = [span.state for span in request_spans(trace) if span.seq_id == sid]
        # waiting, prefill, decode, then back to waiting and a recompute prefill
        assert states[:5] == ["waiting", "prefill", "decode", "waiting", "prefill"]
        assert requests[sid].finish_reason == "length" and requests[sid].num_completion_tokens == 20
    # A victim gives way in the step that preempts it: it is not in that step's batch.
    assert all(not set(row.preempted) & set(row.seq_ids) for row in preempting)


def test_chunked_prefill_tables(traces):
    trace = traces["chunked"]
    steps = trace.steps
    assert [(r.phase, r.num_batched_tokens, r.chunked) for r in steps[:3]] == [
        ("prefill", 32, [0]), ("prefill", 32, [0]), ("prefill", 6 + 10, [])]
    # The engine's stat counts the whole sequence (70), the step computed 32: why num_batched_tokens exists.
    assert steps[0].num_tokens_stat == 70 and steps[0].seq_ids == [0]
    long_prompt = trace.requests[0]
    assert (long_prompt.first_scheduled_step, long_prompt.first_token_step) == (1, 3)
    assert long_prompt.num_completion_tokens == 8
    spans = [s for s in request_spans(trace) if s.seq_id == 0]
    assert [(s.state, s.step_start, s.step_end) for s in spans][:2] == [("waiting", 1, 1), ("prefill", 1, 4)]


def test_prefix_cache_tables(traces):
    trace = traces["prefix"]
    hits = [row for row in trace.steps if row.prefix_hit_seq_ids]
    assert [(row.prefix_hit_seq_ids, row.num_cached_tokens) for row in hits] == [([1, 2], 2 * 32)]
    requests = trace.requests
    assert [r.num_cached_tokens for r in requests] == [0, 32, 32]  # 40 shared tokens = 2 full blocks of 16
    assert requests[1].enqueue_step == hits[0].step  # the second generate() call's first step
    finishes = trace.events_named("GENERATE_FINISH")
    assert len(finishes) == 2 and sum(e.stats["total_steps"] for e in finishes) == len(trace.steps)


def test_interrupted_run_tables(traces):
    trace = traces["crashed"]
    # The model runner failed in step 3: no STEP_DONE, so no row; the requests were aborted after the
    # failed step, outside any step.
    assert [row.step for row in trace.steps] == [1, 2]
    assert not trace.events_named("GENERATE_FINISH")
    assert [(r.finish_reason, r.num_completion_tokens, r.finish_step) for r in trace.requests] == [
        ("aborted", 2, None), ("aborted", 2, None)]
    assert trace.requests[0].tpot_ms is not None and trace.requests[0].e2e_ms > trace.requests[0].ttft_ms
    assert {s.state for s in request_spans(trace)} == {"waiting", "prefill", "decode"}


def test_late_arrivals(traces):
    trace = traces["arrivals"]
    requests = trace.requests
    # Request 1 arrives once 3 steps have run; request 2 is due after 20, but the engine runs dry after step 7
    # (request 1: prefill in step 4, decodes in 5-7) and takes it at once.
    assert [r.enqueue_step for r in requests][:2] == [1, 4]
    for r in requests:
        assert r.first_scheduled_step == r.enqueue_step and r.num_completion_tokens == 4
    assert requests[2].enqueue_step == requests[1].finish_step + 1
    assert requests[2].enqueue_t_ns > requests[1].finish_t_ns
    steps = {row.step: row for row in trace.steps}
    assert steps[4].phase == "prefill" and steps[4].seq_ids == [1]
    waiting = [s for s in request_spans(trace) if s.state == "waiting"]
    assert [(s.seq_id, s.step_start, s.step_end) for s in waiting] == [(0, 1, 1), (1, 4, 4), (2, 8, 8)]


def test_text_tables(traces):
    trace = traces["preemption"]
    text = format_step_table(trace.steps, limit=5)
    lines = text.splitlines()
    assert lines[0].split() == ["step", "phase", "bs", "tokens", "stat", "latency_ms", "held", "used", "free",
                                "wait", "run", "finished", "preempted"]
    assert lines[1].split()[:5] == ["1", "prefill", "2", "57", "59"]
    assert lines[-1] == f"... {len(trace.steps) - 5} more steps" and len(lines) == 7
    assert len(format_step_table(trace.steps).splitlines()) == len(trace.steps) + 1
    requests = format_request_table(trace.requests).splitlines()
    assert requests[0].split()[:3] == ["seq", "prompt", "max"] and len(requests) == 4
    assert requests[1].split()[7] == "length"


# ---- bad files ----------------------------------------------------------------------------------------


def _lines(rec: Recorded) -> list[str]:
    return rec.path.read_text(encoding="utf-8").splitlines(keepends=True)


def _write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def test_a_valid_trace_takes_the_fast_path(recorded):
    """The whole-body decode must accept every well-formed trace: falling back to the line-by-line reader
    would give the same events, only several times slower, so nothing else would notice."""
    from nanovllm_teach.trace import reader
    lines = _lines(recorded["normal"])
    body = "".join(lines[1:]).encode("utf-8").removesuffix(b"\n")
    fast = reader._parse_events_at_once(body, has_lines=True)
    assert fast is not None
    slow = [reader._parse_event(Path("x"), n + 2, raw, n, truncated=False)
            for n, raw in enumerate(body.split(b"\n"))]
    assert fast == slow
    assert [(e.i, e.event, e.stats) for e in load_trace(recorded["normal"].path).events] == \
        [(line.i, line.__struct_config__.tag, line.stats) for line in fast]
    blank_line = b"\n".join(body.split(b"\n")[:3] + [b""] + body.split(b"\n")[3:])
    assert reader._parse_events_at_once(blank_line, has_lines=True) is None


def test_truncated_last_line(recorded, tmp_path):
    lines = _lines(recorded["normal"])
    path = _write(tmp_path, "cut.jsonl", "".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    with pytest.raises(TraceFormatError, match=rf"cut\.jsonl, line {len(lines)}: truncated") as info:
        load_trace(path)
    assert isinstance(info.value, ValueError) and info.value.line == len(lines)
    with pytest.warns(UserWarning, match=rf"cut\.jsonl, line {len(lines)}"):
        prefix = load_trace(path, strict=False)
    assert len(prefix.events) == len(lines) - 2  # header and the cut line
    assert prefix.steps == load_trace(recorded["normal"].path).steps  # the cut line was GENERATE_FINISH


def test_garbage_line_in_the_middle(recorded, tmp_path):
    lines = _lines(recorded["normal"])
    for bad in ("this is not json\n", "[1, 2, 3]\n", '{"i": 4}\n', "\n", b"\xff\xfe\x00garbage\n"):
        text = "".join(lines[:5]).encode() + (bad if isinstance(bad, bytes) else bad.encode()) + \
            "".join(lines[6:]).encode()
        path = _write(tmp_path, "garbage.jsonl", text)
        with pytest.raises(TraceFormatError, match=r"garbage\.jsonl, line 6: "):
            load_trace(path)
        with pytest.warns(UserWarning, match=r"line 6: .*skipped that line"):
            kept = load_trace(path, strict=False).events
        assert [e.i for e in kept] == [i for i in range(len(lines) - 1) if i != 4]  # only the bad line is gone


def test_missing_event_is_an_index_gap(recorded, tmp_path):
    lines = _lines(recorded["normal"])
    path = _write(tmp_path, "gap.jsonl", "".join(lines[:10] + lines[11:]))
    with pytest.raises(TraceFormatError, match=r"line 11: event index i=10, expected 9"):
        load_trace(path)


def test_wrong_field_type(recorded, tmp_path):
    lines = _lines(recorded["normal"])
    event = json.loads(lines[3])
    event["step"] = "one"
    path = _write(tmp_path, "types.jsonl", "".join(lines[:3]) + json.dumps(event) + "\n" + "".join(lines[4:]))
    expected = rf"line 4: {event['event']} event, line field 'step': expected `int \| null`, got `str`"
    with pytest.raises(TraceFormatError, match=expected):
        load_trace(path)


def test_fields_from_a_newer_writer_are_ignored(recorded, tmp_path):
    lines = _lines(recorded["normal"])
    events = [{**json.loads(line), "gpu_clock_mhz": 1980} for line in lines[1:]]
    path = _write(tmp_path, "newer.jsonl", lines[0] + "".join(json.dumps(e) + "\n" for e in events))
    assert load_trace(path).events == load_trace(recorded["normal"].path).events


def test_a_bool_is_not_an_event_index(recorded, tmp_path):
    lines = _lines(recorded["normal"])
    event = {**json.loads(lines[2]), "i": True}  # i=1 would be right; True == 1 in Python
    path = _write(tmp_path, "bool.jsonl", lines[0] + lines[1] + json.dumps(event) + "\n" + "".join(lines[3:]))
    with pytest.raises(TraceFormatError, match=r"line 3: \w+ event, line field 'i': expected `int`, got `bool`"):
        load_trace(path)


@pytest.mark.parametrize("case", ["no_header", "foreign_schema", "newer_version", "bad_version", "empty",
                                  "not_an_object"])
def test_header_problems_are_fatal_even_when_not_strict(recorded, tmp_path, case):
    lines = _lines(recorded["normal"])
    header = json.loads(lines[0])
    text = {
        "no_header": "".join(lines[1:]),
        "foreign_schema": json.dumps({**header, "schema": "someone.else"}) + "\n" + "".join(lines[1:]),
        "newer_version": json.dumps({**header, "version": SCHEMA_VERSION + 1}) + "\n" + "".join(lines[1:]),
        "bad_version": json.dumps({**header, "version": "1"}) + "\n" + "".join(lines[1:]),
        "empty": "",
        "not_an_object": "42\n" + "".join(lines[1:]),
    }[case]
    message = {"no_header": "missing header", "foreign_schema": "unknown schema 'someone.else'",
               "newer_version": f"schema version {SCHEMA_VERSION + 1} is newer",
               "bad_version": "header version must be", "empty": "empty file",
               "not_an_object": "expected a header object"}[case]
    path = _write(tmp_path, f"{case}.jsonl", text)
    for strict in (True, False):
        with pytest.raises(TraceFormatError, match=rf"{case}\.jsonl, line 1: {message}"):
            load_trace(path, strict=strict)


def test_loading_executes_nothing(tmp_path):
    # Only a JSON parser: a would-be Python expression is just a bad line.
    path = _write(tmp_path, "evil.jsonl", json.dumps({"schema": SCHEMA_NAME, "version": 1}) + "\n"
                  + "__import__('os').system('echo pwned')\n")
    with pytest.raises(TraceFormatError, match="line 2: not valid JSON"):
        load_trace(path)


@pytest.fixture(scope="module")
def normal_file(recorded) -> tuple[bytes, int]:
    path = recorded["normal"].path
    return path.read_bytes(), len(load_trace(path).events)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.floats(0, 1), flip=st.integers(0, 255), where=st.floats(0, 1))
def test_any_damage_gives_a_prefix_or_a_format_error(normal_file, tmp_path, cut, flip, where):
    """Cut the file anywhere and change one byte anywhere: loading never fails any other way, and
    non-strict loading keeps each event at its own index (a skipped line leaves a gap), never more than the
    file had."""
    whole, num_events = normal_file
    data = bytearray(whole[: int(len(whole) * cut)])
    if data:
        data[int((len(data) - 1) * where)] = flip
    path = _write(tmp_path, "damaged.jsonl", bytes(data))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trace = load_trace(path, strict=False)
    except TraceFormatError as error:
        assert "damaged.jsonl, line 1: " in str(error)  # only a bad header is fatal when not strict
        return
    kept = [e.i for e in trace.events]
    assert kept == sorted(set(kept)) and set(kept) <= set(range(num_events))
