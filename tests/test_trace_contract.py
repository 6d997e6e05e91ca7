"""The typed event contract (``nanovllm_teach.trace.events``): loading checks every event against its type
and names the file, line, event and field of a bad one; lenient loading skips it; the volatile fields, the
format reference and the payloads' dict reading all come from the same declarations.

Traces: ``data/small_trace.jsonl`` and the shipped ``traces/*.jsonl`` (schema version 1), corrupted one
field at a time.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import msgspec
import pytest

from nanovllm_teach.trace import (
    PAYLOADS, SCHEMA_VERSION, VOLATILE, ContractError, Trace, TraceEvent, TraceFormatError, check_consistency,
    check_payload, load_trace,
)
from nanovllm_teach.trace import docs, events, reader
from nanovllm_teach.trace.payload import field_meta

ROOT = Path(__file__).resolve().parent.parent
SMALL = ROOT / "tests" / "data" / "small_trace.jsonl"
SHIPPED = sorted((ROOT / "traces").glob("*.jsonl"))


def _corrupt(tmp_path: Path, change, name: str = "STEP_DONE") -> tuple[Path, int]:
    """A copy of the small trace with ``change(event_dict)`` applied to its first ``name`` event; returns
    the file and the 1-based line of that event."""
    lines = SMALL.read_text(encoding="utf-8").splitlines()
    for n, line in enumerate(lines[1:], start=2):
        event = json.loads(line)
        if event["event"] == name:
            change(event)
            # JSON has no infinity: ``1e400`` is a number too large for a float, written as is.
            lines[n - 1] = json.dumps(event).replace('"<1e400>"', "1e400")
            break
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, n


def _set(key, value):
    def change(event):
        event["stats"][key] = value
    return change


def _drop(key):
    def change(event):
        del event["stats"][key]
    return change


def _top(key, value):
    def change(event):
        event[key] = value
    return change


CASES = {
    "latency_missing": (_drop("latency_ms"), "STEP_DONE", "latency_ms", "missing required field"),
    "latency_string": (_set("latency_ms", "fast"), "STEP_DONE", "latency_ms", "expected `float`, got `str`"),
    "latency_infinite": (_set("latency_ms", "<1e400>"), "STEP_DONE", "latency_ms", "out of range"),
    "latency_negative": (_set("latency_ms", -1.0), "STEP_DONE", "latency_ms", ">= 0"),
    "seq_ids_int": (_set("seq_ids", 7), "STEP_DONE", "seq_ids", "expected `array`, got `int`"),
    "seq_ids_item": (_set("seq_ids", [0, "one"]), "STEP_DONE", "seq_ids[1]", "expected `int`, got `str`"),
    "bool_count": (_set("batch_size", True), "STEP_DONE", "batch_size", "expected `int`, got `bool`"),
    "unknown_field": (_set("gpu_clock_mhz", 1980), "STEP_DONE", "gpu_clock_mhz", "unknown field"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_malformed_payload_names_file_line_event_and_field(tmp_path, case):
    change, event, field, problem = CASES[case]
    path, line = _corrupt(tmp_path, change)
    with pytest.raises(TraceFormatError) as info:
        load_trace(path)
    error = info.value
    assert isinstance(error, ValueError)
    assert (error.path, error.line, error.event, error.field) == (str(path), line, event, field)
    assert str(error).startswith(f"{path}, line {line}: {event}.{field}: ")
    assert problem in str(error)


@pytest.mark.parametrize("case", sorted(CASES))
def test_lenient_loading_skips_only_the_bad_event(tmp_path, case):
    path, line = _corrupt(tmp_path, CASES[case][0])
    whole = load_trace(SMALL)
    with pytest.warns(UserWarning, match=rf"bad\.jsonl, line {line}: .*skipped that line, keeping the"):
        trace = load_trace(path, strict=False)
    assert [e.i for e in trace.events] == [e.i for e in whole.events if e.i != line - 2]


def test_unknown_event_and_phase_are_refused(tmp_path):
    path, line = _corrupt(tmp_path, _top("event", "STEP_DONNE"))
    with pytest.raises(TraceFormatError, match=rf"line {line}: unknown event 'STEP_DONNE'"):
        load_trace(path)
    path, line = _corrupt(tmp_path, _top("phase", "warmup"))
    with pytest.raises(TraceFormatError, match=rf"line {line}: STEP_DONE event, line field 'phase': invalid"):
        load_trace(path)
    path, line = _corrupt(tmp_path, _top("stats", [1, 2]))
    with pytest.raises(TraceFormatError, match=rf"line {line}: STEP_DONE: expected `object`, got `array`"):
        load_trace(path)


def test_a_folder_is_not_a_trace(tmp_path):
    with pytest.raises(TraceFormatError, match="is a folder"):
        load_trace(tmp_path)


@pytest.mark.parametrize("path", SHIPPED + [SMALL], ids=lambda p: p.name)
def test_shipped_traces_load_typed_and_consistent(path):
    """Version 1 (recorded before the contract was typed), 2 or 3 (resolved settings in the header): all load
    the same way."""
    trace = load_trace(path)
    assert trace.header["version"] in (1, 2, 3)
    assert all(isinstance(e.stats, PAYLOADS[e.event]) for e in trace.events)
    assert check_consistency(trace) == []
    # The fast path (one decode of the whole file) took every line: the slow one agrees with it.
    body = path.read_bytes().split(b"\n", 1)[1].removesuffix(b"\n")
    fast = reader._parse_events_at_once(body, has_lines=True)
    assert fast is not None and len(fast) == len(trace.events)


def test_every_event_has_a_documented_payload():
    assert set(PAYLOADS) == set(events.EVENTS)
    for name, cls in PAYLOADS.items():
        assert cls.event == name
        for field, _, meta, _ in field_meta(cls):
            assert meta is not None and meta.description, f"{name}.{field} has no meaning"


def test_volatile_fields_come_from_the_contract():
    declared = set(events.volatile_fields())
    assert {"STEP_DONE.latency_ms", "WARMUP.peak_bytes", "KV_BUDGET_ESTIMATE.free", "ENGINE_READY.device"} <= declared
    assert declared <= VOLATILE and "t_ns" in VOLATILE and "header.recorded_at" in VOLATILE
    assert "STEP_DONE.seq_ids" not in VOLATILE and "KV_BUDGET_ESTIMATE.num_blocks" not in VOLATILE


def test_the_format_reference_is_up_to_date(tmp_path, capsys):
    assert docs.main(["--check"]) == 0, "docs/trace-format.md is stale: python -m nanovllm_teach.trace.docs"
    text = docs.DOC_PATH.read_text(encoding="utf-8")
    for name in PAYLOADS:
        assert f"\n## {name}\n" in text
    assert "| `latency_ms` | float ≥ 0 (finite) | ms |  | yes | wall time of the step |" in text
    stale = tmp_path / "trace-format.md"
    stale.write_text(text.replace("wall time of the step", "how long it took"), encoding="utf-8")
    assert docs.main(["--check", "--out", str(stale)]) == 1
    assert "is stale" in capsys.readouterr().err


def test_check_payload_types_a_dict_or_names_the_field():
    done = {"latency_ms": 1.5, "num_tokens_stat": -2, "batch_size": 2, "seq_ids": [0, 1], "finished": [],
            "used_blocks": 3, "free_blocks": 5, "waiting_len": 0, "running_len": 2}
    typed = check_payload("STEP_DONE", done)
    assert isinstance(typed, events.StepDone) and typed.seq_ids == [0, 1]
    for bad, field in (({**done, "seq_ids": 7}, "seq_ids"), ({**done, "extra": 1}, "extra"),
                       ({k: v for k, v in done.items() if k != "used_blocks"}, "used_blocks")):
        with pytest.raises(ContractError) as info:
            check_payload("STEP_DONE", bad)
        assert info.value.event == "STEP_DONE" and info.value.field == field
        assert str(info.value).startswith(f"STEP_DONE.{field}: ")
    with pytest.raises(ContractError, match="NOPE: unknown event"):
        check_payload("NOPE", {})


def test_a_payload_reads_and_edits_like_a_dict():
    transition = check_payload("STATE_TRANSITION", {"seq_id": 3, "from": "WAITING", "to": "RUNNING",
                                                    "num_completion_tokens": 0, "max_tokens": 8})
    assert transition["from"] == "WAITING" and transition.from_ == "WAITING"
    assert list(transition) == ["seq_id", "from", "to", "num_completion_tokens", "max_tokens"]
    assert "token_id" not in transition and transition.get("token_id", "absent") == "absent"
    with pytest.raises(KeyError):
        transition["token_id"]
    transition["token_id"] = 5
    assert "token_id" in transition and dict(transition.items())["token_id"] == 5
    del transition["token_id"]
    assert "token_id" not in transition
    with pytest.raises(KeyError):
        transition["not_a_field"] = 1
    assert msgspec.json.decode(msgspec.json.encode(transition)) == transition.to_dict()


def test_events_built_by_hand_are_typed_by_the_trace():
    header = {"schema": "nanovllm_teach.trace", "version": 2}
    start = TraceEvent(0, 0, "GENERATE_START", "ingress", None, "batch_enters_engine", {"n_prompts": 2})
    trace = Trace(header, [start])
    assert isinstance(trace.events[0].stats, events.GenerateStart) and trace.events[0].stats.n_prompts == 2
    with pytest.raises(ContractError, match="GENERATE_START.n_prompts"):
        Trace(header, [TraceEvent(0, 0, "GENERATE_START", "ingress", None, "x", {"n_prompts": -1})])


def test_a_newer_version_is_refused_with_what_to_do(tmp_path):
    lines = SMALL.read_text(encoding="utf-8").splitlines()
    header = {**json.loads(lines[0]), "version": SCHEMA_VERSION + 1}
    path = tmp_path / "future.jsonl"
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
    with pytest.raises(TraceFormatError, match=f"schema version {SCHEMA_VERSION + 1} is newer"):
        load_trace(path)
    old = tmp_path / "old.jsonl"
    old.write_text("\n".join([json.dumps({**header, "version": 1}), *lines[1:]]) + "\n", encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(load_trace(old).events) == len(lines) - 1  # version 1 loads, silently
