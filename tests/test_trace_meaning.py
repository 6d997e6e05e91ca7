"""What an event means is said once, by its payload type (``trace/events.py``), and its sentences once, keyed
by that type (``trace/reasons.py``): these tests fail if a second list of event names with a meaning comes
back anywhere in trace/ or viz/, if a reader's set stops being derived from the payload types, or if an
event is emitted with a reason key that lacks an English or a Chinese sentence."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from nanovllm_teach.trace import console, diff, schema, state
from nanovllm_teach.trace.events import EVENTS, PAYLOADS, events_where
from nanovllm_teach.trace.payload import Payload
from nanovllm_teach.trace.reasons import EVENT_REASONS, LANGS, REASONS, SENTENCES, explain

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "nanovllm_teach"
SHIPPED_TRACES = sorted((ROOT / "traces").glob("*.jsonl")) + [ROOT / "tests" / "data" / "small_trace.jsonl"]
CHINESE = re.compile(r"[\u4e00-\u9fff]")


def test_each_readers_set_is_what_the_payload_types_say():
    assert state.STATE_EVENTS == {name for name, p in PAYLOADS.items() if p.changes_state}
    assert set(diff.DECISION_EVENTS) == {name for name, p in PAYLOADS.items() if p.decision}
    assert schema.TENSOR_EVENTS == {name for name, p in PAYLOADS.items() if p.carries_tensors}
    assert all(console.shown_from(name) == p.shown_from for name, p in PAYLOADS.items())
    assert console.shown_from("AN_EVENT_FROM_A_NEWER_ENGINE") == "normal"  # shown, never hidden


def test_the_meanings_are_the_ones_the_engine_has():
    # The exact sets the interpreter, diff and the console were written for: a flag moved by mistake shows here.
    assert set(events_where(lambda p: p.changes_state)) == {
        "REQUEST_ENQUEUE", "PREFIX_CACHE_HIT", "BLOCK_ALLOCATE", "BLOCK_FREE", "PREEMPT", "SCHEDULE_PREFILL",
        "SCHEDULE_DECODE", "STATE_TRANSITION", "STEP_DONE"}
    assert set(events_where(lambda p: p.decision)) == {
        "SCHEDULE_PREFILL", "SCHEDULE_DECODE", "PREEMPT", "PREFIX_CACHE_HIT", "BLOCK_ALLOCATE", "BLOCK_FREE",
        "STATE_TRANSITION"}
    assert set(events_where(lambda p: p.acts_on_sequence)) == {
        "PREEMPT", "BLOCK_ALLOCATE", "BLOCK_FREE", "PREFIX_CACHE_HIT", "STATE_TRANSITION", "REQUEST_ABORT"}
    assert set(events_where(lambda p: p.shown_from == "detail")) == {
        "PREPARE_PREFILL_TENSORS", "PREPARE_DECODE_TENSORS", "RUN_MODEL", "CUDAGRAPH_REPLAY", "SAMPLE"}


@pytest.mark.parametrize("name", EVENTS)
def test_each_payload_types_meaning_fits_its_fields(name):
    payload = PAYLOADS[name]
    fields = set(payload.__struct_encode_fields__)
    assert payload.event == name
    assert payload.shown_from in ("quiet", "normal", "detail")
    assert payload.carries_tensors == any(field.endswith("_shape") for field in fields)
    assert not payload.decision or payload.changes_state  # diff compares decisions the interpreter applies
    assert not payload.acts_on_sequence or "seq_id" in fields
    assert payload.told_by <= fields | {"reason"}
    assert not payload.told_by or payload.done is not Payload.done  # what it shows, its own phrase says


def test_the_interpreter_has_a_case_for_every_state_changing_event():
    source = (PACKAGE / "trace" / "state.py").read_text(encoding="utf-8")
    apply = next(node for node in ast.walk(ast.parse(source))
                 if isinstance(node, ast.FunctionDef) and node.name == "apply")
    cases = {node.comparators[0].value for node in ast.walk(apply) if isinstance(node, ast.Compare)
             and isinstance(node.comparators[0], ast.Constant) and node.comparators[0].value in PAYLOADS}
    assert cases == state.STATE_EVENTS


def _module_level_event_lists(path: Path) -> list[str]:
    """Module-level constants in ``path`` that spell out two or more event names: a set, tuple or list of
    them, or a dict keyed by them."""
    found = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        for literal in ast.walk(value) if value is not None else ():
            items = (literal.keys if isinstance(literal, ast.Dict)
                     else literal.elts if isinstance(literal, (ast.Set, ast.Tuple, ast.List)) else [])
            names = [item.value for item in items if isinstance(item, ast.Constant) and item.value in PAYLOADS]
            if len(names) >= 2:
                found.append(f"{path.parent.name}/{path.name}:{node.lineno}: {names}")
    return found


def test_no_second_list_of_event_names_in_trace_or_viz():
    # events.py's PAYLOADS is the one list; every other reader asks the payload types.
    modules = [p for folder in ("trace", "viz") for p in sorted((PACKAGE / folder).glob("*.py"))
               if p != PACKAGE / "trace" / "events.py"]
    assert len(modules) > 20
    found = [hit for path in modules for hit in _module_level_event_lists(path)]
    assert not found, ("event names listed outside events.py (declare the meaning on the payload type):\n"
                       + "\n".join(found))


def test_the_scan_finds_a_list_when_there_is_one(tmp_path):
    # Otherwise the test above would prove nothing.
    module = tmp_path / "module.py"
    module.write_text('_LIFECYCLE = frozenset({"ENGINE_INIT", "PREEMPT"})\n_CASES = {"SAMPLE": 1, "RUN_MODEL": 2}\n')
    assert len(_module_level_event_lists(module)) == 2


@pytest.mark.parametrize("name", EVENTS)
def test_every_event_has_its_reasons_in_english_and_chinese(name):
    keys = SENTENCES.get(PAYLOADS[name])
    assert keys, f"{name} has no reason sentences in reasons.SENTENCES"
    for key, sentences in keys.items():
        assert set(sentences) == set(LANGS), (name, key)
        assert all(sentences[lang].strip() for lang in LANGS), (name, key)
        assert CHINESE.search(sentences["zh"]), (name, key, sentences["zh"])
        assert sentences["en"] != sentences["zh"], (name, key)
        for lang in LANGS:
            assert explain(key, lang, name) == sentences[lang]


def test_the_lookups_by_name_are_the_table():
    assert set(SENTENCES) <= set(PAYLOADS.values())
    assert EVENT_REASONS == {(p.event, key): s for p, keys in SENTENCES.items() for key, s in keys.items()}
    for key, sentences in REASONS.items():  # a key said alone means the same with every event
        assert all(s == sentences for (_, k), s in EVENT_REASONS.items() if k == key), key
    for key in {k for (_, k) in EVENT_REASONS} - set(REASONS):  # and one left out means different things
        assert len({tuple(s.items()) for (_, k), s in EVENT_REASONS.items() if k == key}) > 1, key


@pytest.mark.parametrize("path", SHIPPED_TRACES, ids=lambda p: p.name)
def test_every_reason_a_shipped_trace_holds_has_its_events_sentence(path):
    pairs = set()
    with path.open(encoding="utf-8") as f:
        next(f)  # the header
        for line in f:
            event = json.loads(line)
            pairs.add((event["event"], event["reason"]))
    missing = sorted(pair for pair in pairs if pair not in EVENT_REASONS)
    assert not missing, f"{path.name}: (event, reason) without sentences: {missing}"


def test_every_event_says_whose_work_it_reports_and_the_decisions_are_the_resources_layers():
    """The architecture notebook and its picture put each event in a layer by its payload type's ``actor``."""
    from nanovllm_teach.trace.payload import LAYERS

    assert {cls.actor for cls in PAYLOADS.values()} == set(LAYERS)
    for name, cls in PAYLOADS.items():
        if cls.decision:
            assert LAYERS[cls.actor] == "resources", name
        if cls.carries_tensors or name in ("RUN_MODEL", "CUDAGRAPH_REPLAY", "SAMPLE", "KV_BUDGET_ESTIMATE"):
            assert cls.actor == "ModelRunner", name
