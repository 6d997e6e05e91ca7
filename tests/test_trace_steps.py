"""One cut of a trace into steps (``trace/steps.py``): a step's events run from just after the previous
STEP_DONE to its own, they cover the trace up to its last STEP_DONE once each, and everything that shows a
trace step by step (the player, the replay page, the random-access replay) cuts it there and nowhere else."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from nanovllm_teach.trace import EngineReplay, TraceEvent, load_trace, replay_blocks
from nanovllm_teach.trace.console import ConsoleRenderer
from nanovllm_teach.trace.steps import cut_steps, step_ends
from nanovllm_teach.viz.page import page_data
from test_viz_page import decoded_lines

ROOT = Path(__file__).resolve().parents[1]
TRACES = sorted((ROOT / "traces").glob("*.jsonl")) + [ROOT / "tests" / "data" / "small_trace.jsonl"]


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_the_steps_cover_the_trace_once_in_order(path):
    trace = load_trace(path)
    cut = cut_steps(trace.events)
    assert list(cut.spans) == [row.step for row in trace.steps]
    position = 0
    for step, span in cut.spans.items():
        assert span.start == position and len(span) > 0
        events = cut.events(trace.events, step)
        assert events[-1].event == "STEP_DONE" and events[-1].step == step
        assert all(e.event != "STEP_DONE" for e in events[:-1])
        assert all(e.step in (None, step) for e in events)  # its own events and those leading into it
        position = span.stop
    assert cut.after == range(position, len(trace.events))
    assert all(e.event != "STEP_DONE" for e in trace.events[position:])


def _event(i: int, name: str, step: int | None, stats: dict) -> TraceEvent:
    return TraceEvent(i, i, name, "decode", step, "", stats)


def test_what_comes_between_steps_belongs_to_the_next_one():
    done = {"latency_ms": 1.0, "num_tokens_stat": -1, "batch_size": 1, "seq_ids": [0], "finished": [],
            "used_blocks": 1, "free_blocks": 3, "waiting_len": 0, "running_len": 1}
    events = [_event(0, "GENERATE_START", None, {"n_prompts": 1}),
              _event(1, "STEP_DONE", 1, done),
              _event(2, "GENERATE_START", None, {"n_prompts": 1}),
              _event(3, "SAMPLE", 2, {"seq_ids": [0], "temperatures": [0.0], "token_ids": [5]}),
              _event(4, "STEP_DONE", 2, done),
              _event(5, "SAMPLE", 3, {"seq_ids": [0], "temperatures": [0.0], "token_ids": [6]})]
    cut = cut_steps(events)
    assert cut.spans == {1: range(0, 2), 2: range(2, 5)}
    assert cut.after == range(5, 6)  # a step that never completed belongs to none


def test_the_player_page_and_replay_agree_with_the_cut():
    trace = load_trace(ROOT / "traces" / "preemption.jsonl")
    cut = cut_steps(trace.events)
    assert EngineReplay(trace).steps == sorted(cut.spans)
    assert replay_blocks(trace) == {step: {b: sorted(s) for b, s in sorted(state.holders.items())}
                                    for step, state in step_ends(trace.events, trace.settings)}
    renderer = ConsoleRenderer("en")
    expected = [[line for e in cut.events(trace.events, step) for line in renderer.lines(e)] for step in cut.spans]
    assert [step["en"] for step in decoded_lines(page_data(trace))] == expected


def test_nothing_else_in_viz_or_the_replay_cuts_a_trace_itself():
    # Finding a step's end by its STEP_DONE is steps.py's (and the interpreter's) business.
    package = ROOT / "nanovllm_teach"
    modules = sorted((package / "viz").glob("*.py")) + [package / "trace" / "replay.py"]
    for path in modules:
        strings = {node.value for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                   if isinstance(node, ast.Constant)}
        assert "STEP_DONE" not in strings, f"{path.name} finds step ends itself: use trace.steps"
