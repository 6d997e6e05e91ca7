"""The Chrome trace-event export: the fields Perfetto's legacy JSON importer reads (ph, ts, dur, pid, tid,
name, thread_name metadata), one slice per engine step, a track per request, counters and preemption
markers, all in microseconds."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from nanovllm_teach.trace import load_trace, request_spans, to_chrome_trace, write_chrome_trace
from nanovllm_teach.trace.perfetto import ENGINE_PID, ENGINE_TID, REQUESTS_PID
from test_trace_reader import record_scenarios


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    recorded = record_scenarios(tmp_path_factory.mktemp("perfetto"), ("preemption", "prefix"))
    return {name: (trace, to_chrome_trace(trace))
            for name, trace in ((name, load_trace(rec.path)) for name, rec in recorded.items())}


def _of(chrome, ph, pid=None, name=None):
    return [e for e in chrome["traceEvents"]
            if e["ph"] == ph and (pid is None or e["pid"] == pid) and (name is None or e["name"] == name)]


def test_every_event_has_the_fields_the_importer_needs(exported):
    for trace, chrome in exported.values():
        assert json.loads(json.dumps(chrome)) == chrome  # plain JSON
        assert chrome["displayTimeUnit"] == "ms" and chrome["otherData"]["schema"] == trace.header["schema"]
        for e in chrome["traceEvents"]:
            assert {"ph", "pid", "name", "ts"} <= set(e), e
            assert e["ph"] in {"M", "X", "C", "i"}
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
            if e["ph"] in ("X", "i", "M"):
                assert isinstance(e["tid"], int)
            if e["ph"] == "X":
                assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
            if e["ph"] == "i":
                assert e["s"] == "t"
            if e["ph"] == "C":
                assert e["args"] and all(isinstance(v, (int, float)) for v in e["args"].values())


def test_tracks_are_named(exported):
    trace, chrome = exported["preemption"]
    names = {(e["pid"], e["tid"], e["name"]): e["args"].get("name") for e in _of(chrome, "M")}
    assert names[(ENGINE_PID, 0, "process_name")] == "engine"
    assert names[(REQUESTS_PID, 0, "process_name")] == "requests"
    assert names[(ENGINE_PID, ENGINE_TID, "thread_name")] == "engine steps"
    request_tracks = {tid: name for (pid, tid, kind), name in names.items()
                      if pid == REQUESTS_PID and kind == "thread_name"}
    assert sorted(request_tracks.values()) == [f"seq {r.seq_id}" for r in trace.requests]


def test_engine_steps_are_slices_in_microseconds(exported):
    for trace, chrome in exported.values():
        slices = _of(chrome, "X", ENGINE_PID)
        assert [s["args"]["step"] for s in slices] == [row.step for row in trace.steps]
        for s, row in zip(slices, trace.steps):
            assert s["name"] == row.phase and s["tid"] == ENGINE_TID
            assert s["ts"] == pytest.approx(row.t_start_ns / 1000, abs=1e-3)
            assert s["dur"] == pytest.approx(row.latency_ms * 1000, abs=1.0)
            assert (s["args"]["batch_size"], s["args"]["num_batched_tokens"], s["args"]["used_blocks"]) == (
                row.batch_size, row.num_batched_tokens, row.used_blocks)
        generate = _of(chrome, "i", ENGINE_PID)
        assert [g["name"] for g in generate] == ["generate_start", "generate_finish"] * len(
            trace.events_named("GENERATE_START"))


def test_slices_on_a_track_never_overlap(exported):
    for _, chrome in exported.values():
        tracks = defaultdict(list)
        for s in _of(chrome, "X"):
            tracks[(s["pid"], s["tid"])].append(s)
        for track in tracks.values():
            track.sort(key=lambda s: s["ts"])
            for before, after in zip(track, track[1:]):
                assert before["ts"] + before["dur"] <= after["ts"] + 1e-3, (before, after)


def test_request_tracks_cover_each_request_from_enqueue_to_finish(exported):
    for trace, chrome in exported.values():
        by_tid = defaultdict(list)
        for s in _of(chrome, "X", REQUESTS_PID):
            by_tid[s["tid"]].append(s)
        for req in trace.requests:
            spans = sorted(by_tid[req.seq_id + 1], key=lambda s: s["ts"])
            assert [s["args"]["seq_id"] for s in spans] == [req.seq_id] * len(spans)
            assert spans[0]["name"] == "waiting" and spans[-1]["name"] == "decode"
            assert spans[0]["ts"] == pytest.approx(req.enqueue_t_ns / 1000, abs=1e-3)
            assert spans[-1]["ts"] + spans[-1]["dur"] == pytest.approx(req.finish_t_ns / 1000, abs=1e-3)
            for before, after in zip(spans, spans[1:]):  # back to back: no gap, no overlap
                assert before["ts"] + before["dur"] == pytest.approx(after["ts"], abs=1e-3)
        assert len(_of(chrome, "X", REQUESTS_PID)) == len(request_spans(trace))


def test_preemptions_are_instants_on_the_victims_track(exported):
    trace, chrome = exported["preemption"]
    marks = _of(chrome, "i", REQUESTS_PID, "preempted")
    preempts = trace.events_named("PREEMPT")
    assert preempts and len(marks) == len(preempts)
    for mark, event in zip(marks, preempts):
        assert mark["tid"] == event.stats["seq_id"] + 1 and mark["args"]["step"] == event.step
        assert mark["ts"] == pytest.approx(event.t_ns / 1000, abs=1e-3)
    victim_spans = [s["name"] for s in _of(chrome, "X", REQUESTS_PID) if s["tid"] == marks[0]["tid"]]
    assert victim_spans.count("prefill") == 2  # prefilled again after the preemption (recompute)


def test_counters_follow_the_step_table(exported):
    trace, chrome = exported["prefix"]
    batch = _of(chrome, "C", ENGINE_PID, "batch_size")
    blocks = _of(chrome, "C", ENGINE_PID, "kv_blocks")
    assert [c["args"]["batch_size"] for c in batch] == [row.batch_size for row in trace.steps]
    assert [(c["args"]["used"], c["args"]["free"]) for c in blocks] == [
        (row.used_blocks, row.free_blocks) for row in trace.steps]


def test_write_chrome_trace(exported, tmp_path):
    trace, chrome = exported["prefix"]
    path = write_chrome_trace(trace, tmp_path / "out" / "prefix.json")
    assert json.loads(path.read_text(encoding="utf-8")) == chrome
