"""Trace diffing (``nanovllm_teach.trace.diff``): identical runs agree whatever their timing and memory,
and each kind of disagreement is reported at its first event, in plain words.

The traces are ``data/small_trace.jsonl`` (a real run: a preemption in step 2, prefix-cache hits in steps 13
and 24) and copies of it with one decision changed, as a buggy engine would have made it.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from nanovllm_teach.cli import main
from nanovllm_teach.trace import VOLATILE, Trace, diff_traces, load_trace
from nanovllm_teach.trace.diff import Voice

TRACE = Path(__file__).resolve().parent / "data" / "small_trace.jsonl"


@pytest.fixture(scope="module")
def reference() -> Trace:
    return load_trace(TRACE)


@pytest.fixture
def yours(reference) -> Trace:
    return Trace(copy.deepcopy(reference.header), copy.deepcopy(reference.events))


def _first(trace: Trace, name: str, **where):
    return next(e for e in trace.events if e.event == name and all(getattr(e, k) == v for k, v in where.items()))


def _write(trace: Trace, path: Path) -> Path:
    import json
    lines = [json.dumps(trace.header)] + [json.dumps(e.to_dict()) for e in trace.events]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_trace_agrees_with_itself_and_with_a_copy_from_another_machine(reference, yours):
    assert diff_traces(reference, reference) is None
    # Another machine, another day: clocks, memory, model folder and library versions all differ.
    yours.header["recorded_at"] = "2031-01-01T00:00:00+00:00"
    yours.header["versions"] = {"torch": "9.9"}
    yours.header["config"]["model"] = "/somewhere/else"
    for e in yours.events:
        e.t_ns += 12345
        e.stats.update({k: 1.5 for k in ("latency_ms", "seconds") if k in e.stats})
        if e.event == "KV_BUDGET_ESTIMATE":
            e.stats.update(free=1, used=2, peak=3, current=4, total=5, budget=6, estimated_num_blocks=7)
        if e.event == "ENGINE_INIT":
            e.stats["model"] = "/somewhere/else"
    assert diff_traces(yours, reference) is None


def test_files_diff_like_loaded_traces(reference, tmp_path):
    assert diff_traces(TRACE, _write(reference, tmp_path / "copy.jsonl")) is None


def test_off_by_one_slot_mapping_names_step_event_and_field(reference, yours):
    event = _first(yours, "PREPARE_DECODE_TENSORS")
    event.stats["slot_mapping"] = [slot + 1 for slot in event.stats["slot_mapping"]]
    d = diff_traces(yours, reference)
    right = _first(reference, "PREPARE_DECODE_TENSORS").stats["slot_mapping"]
    assert d.message == (f"step {event.step}, PREPARE_DECODE_TENSORS.slot_mapping: you wrote "
                         f"{[s + 1 for s in right]}, the reference {right}")
    assert (d.index, d.step, d.event, d.fields, d.where) == (event.i, event.step, "PREPARE_DECODE_TENSORS",
                                                             ("slot_mapping",), f"step {event.step}")
    assert d.yours is event and d.reference.i == event.i


def test_long_lists_show_a_window_around_the_first_difference(reference, yours):
    event = _first(yours, "PREPARE_PREFILL_TENSORS")
    event.stats["slot_mapping"][40] += 1
    message = diff_traces(yours, reference).message
    assert message.startswith("step 1, PREPARE_PREFILL_TENSORS.slot_mapping: you wrote […, ")
    assert "(first difference at position 40 of 57)" in message


def test_a_different_batch_is_said_as_scheduling(reference, yours):
    event = _first(yours, "SCHEDULE_DECODE", step=3)
    event.stats["seq_ids"] = [0, 1]
    d = diff_traces(yours, reference)
    assert d.message == "step 3: you scheduled seqs [0, 1] for decode, the reference scheduled seqs [0] for decode"


def test_a_missing_preemption_is_said_as_such(reference, yours):
    # Without the preemption, the run goes straight from the block events to scheduling the decode.
    yours.events = [e for e in yours.events if not (e.step == 2 and e.event in ("BLOCK_FREE", "PREEMPT"))]
    d = diff_traces(yours, reference)
    assert d.message.startswith("step 2: the reference preempted seq 1 (freeing blocks [2, 3]), you did not")
    assert d.event == "BLOCK_FREE"


def test_an_extra_preemption_is_said_from_your_side(reference, yours):
    d = diff_traces(reference, Trace(yours.header, [e for e in yours.events
                                                    if not (e.step == 2 and e.event == "BLOCK_FREE")]))
    assert d.message == "step 2: you preempted seq 1 (freeing blocks [2, 3]), the reference did not"


def test_another_victim_is_named(reference, yours):
    _first(yours, "PREEMPT").stats["seq_id"] = 0
    assert diff_traces(yours, reference).message == "step 2: you preempted seq 0, the reference preempted seq 1"


def test_prefix_hits_blocks_samples_and_transitions_have_their_own_sentences(reference):
    cases = [
        ("PREFIX_CACHE_HIT", "block_ids", [5], "step 13: you reused the cached blocks [5] for seq 1 (16 tokens), "
                                               "the reference reused the cached blocks [2] for seq 1 (16 tokens)"),
        ("BLOCK_ALLOCATE", "block_ids", [7, 8], "you allocated blocks [7, 8] to seq 0, the reference allocated "
                                                "blocks [0, 1] to seq 0"),
        ("SAMPLE", "token_ids", [36, 319], "step 1: you sampled token 319 for seq 1, the reference sampled token 318"),
        ("STATE_TRANSITION", "to", "FINISHED", "you moved seq 0 from WAITING to FINISHED, the reference moved seq 0 "
                                               "from WAITING to RUNNING"),
    ]
    for name, key, value, expected in cases:
        yours = Trace(reference.header, copy.deepcopy(reference.events))
        _first(yours, name).stats[key] = value
        assert expected in diff_traces(yours, reference).message, name


def test_the_kv_budget_is_said_in_blocks_and_bytes(reference, yours):
    event = _first(yours, "KV_BUDGET_ESTIMATE")
    right = dict(event.stats)
    event.stats.update(block_bytes=right["block_bytes"] // 2, num_blocks=right["num_blocks"] * 2)
    assert diff_traces(yours, reference).message == (
        f"at start-up: you sized the KV cache at {right['num_blocks'] * 2} blocks of {right['block_bytes'] // 2} "
        f"bytes, the reference sized the KV cache at {right['num_blocks']} blocks of {right['block_bytes']} bytes")


def test_other_fields_are_compared_one_by_one(reference, yours):
    event = _first(yours, "STEP_DONE", step=4)
    event.stats.update(used_blocks=event.stats["used_blocks"] + 1, free_blocks=event.stats["free_blocks"] - 1)
    message = diff_traces(yours, reference).message
    assert message.startswith("step 4, STEP_DONE.used_blocks: you had ")
    assert message.endswith("(and 1 more: free_blocks)")


def test_a_shorter_trace_ends_early(reference):
    d = diff_traces(Trace(reference.header, reference.events[:100]), reference)
    assert d.index == 100 and d.yours is None
    assert d.message.startswith(f"step {reference.events[100].step}: your trace ends here, the reference goes on:")


def test_different_settings_show_in_the_header(reference, yours):
    yours.header["config"]["kvcache_block_size"] = 32
    d = diff_traces(yours, reference)
    assert d.index is None and d.where == "in the header"
    assert d.message == ("before the first event, the trace headers differ at config.kvcache_block_size: you had 32, "
                         "the reference 16 (the runs used different settings)")


def test_two_runs_by_name_in_every_sentence(reference, yours):
    named = Voice.named("A", "B")
    yours.header["config"]["kvcache_block_size"] = 32
    assert diff_traces(yours, reference, voice=named).message == (
        "before the first event, the trace headers differ at config.kvcache_block_size: A had 32, B 16 (the runs "
        "used different settings)")
    assert diff_traces(Trace(reference.header, reference.events[:100]), reference, voice=named).message.startswith(
        f"step {reference.events[100].step}: A's trace ends here, B goes on: B ")
    assert diff_traces(reference, Trace(reference.header, reference.events[:100]), voice=named).message.startswith(
        f"step {reference.events[100].step}: B's trace ends here, A goes on: A ")
    changed = Trace(reference.header, copy.deepcopy(reference.events))
    _first(changed, "SAMPLE").stats["token_ids"] = [36, 319]
    assert diff_traces(changed, reference, voice=named).message == (
        "step 1: A sampled token 319 for seq 1, B sampled token 318")


def test_tensor_values_only_one_recorder_kept_are_no_difference(reference, yours):
    # A recorder with a smaller detail budget keeps decode tensors' shapes, not their values.
    detailed = [e for e in yours.events if e.event == "PREPARE_DECODE_TENSORS" and "slot_mapping" in e.stats]
    assert detailed
    for e in detailed:
        del e.stats["slot_mapping"]
    assert diff_traces(yours, reference) is None
    assert diff_traces(reference, yours) is None


def test_ignore_is_a_parameter(reference, yours):
    _first(yours, "SAMPLE").stats["token_ids"] = [1, 2]
    assert diff_traces(yours, reference) is not None
    assert diff_traces(yours, reference, ignore=VOLATILE | {"SAMPLE.token_ids"}) is None


def test_cli_diff_exit_codes_and_output(reference, yours, tmp_path, capsys):
    same = _write(reference, tmp_path / "same.jsonl")
    assert main(["diff", str(TRACE), str(same)]) == 0
    assert capsys.readouterr().out.startswith(f"identical: {len(reference.events)} events agree")
    _first(yours, "PREEMPT").stats["seq_id"] = 0
    assert main(["diff", str(_write(yours, tmp_path / "run_a.jsonl")), str(same)]) == 1
    out = capsys.readouterr().out
    # Two ordinary runs: neither is "you" nor "the reference"; the sentence names their files.
    assert out.splitlines()[0] == "step 2: run_a.jsonl preempted seq 0, same.jsonl preempted seq 1"
    assert "you" not in out and "reference" not in out
    assert "run_a.jsonl event #19: TEACHING/PREEMPT" in out and "same.jsonl event #19: TEACHING/PREEMPT" in out
    assert main(["diff", str(tmp_path / "missing.jsonl"), str(TRACE)]) == 2
    assert "no such trace file" in capsys.readouterr().err


def test_the_cli_goes_past_a_header_difference_to_the_first_decision(capsys):
    """Static and continuous batching differ in their settings by design: the point of diffing them is the
    step where their schedules part ways."""
    from nanovllm_teach.cli import main
    from nanovllm_teach.i18n import speaking

    traces = Path(__file__).resolve().parents[1] / "traces"
    args = ["diff", str(traces / "continuous_arrivals.jsonl"), str(traces / "static_arrivals.jsonl")]
    with speaking("en"):
        assert main(args) == 1
    out = capsys.readouterr().out.splitlines()
    assert "scheduling_policy" in out[0]
    assert out[1].startswith("and the first decision where the runs part ways: step 3: ")
    assert "static_arrivals.jsonl scheduled seqs [0, 1, 2, 3] for decode" in out[1]
    assert "continuous_arrivals.jsonl scheduled seqs [4] for prefill" in out[1]
    # The events are named by their place in their own files.
    continuous = load_trace(traces / "continuous_arrivals.jsonl")
    number = int(out[2].split("event #")[1].split(":")[0])
    assert continuous.events[number].event == "SCHEDULE_PREFILL" and continuous.events[number].step == 3
    assert main(args + ["--lang", "zh"]) == 1
    assert capsys.readouterr().out.splitlines()[1].startswith("两次运行第一个不同的决策：第 3 步：")
