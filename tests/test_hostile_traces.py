"""A trace is a file someone else hands you: nesting too deep to read, and events in an order no engine
writes, are found and said in one sentence, never a traceback."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from nanovllm_teach.trace.consistency import check_consistency, order_problems
from nanovllm_teach.trace.reader import MAX_HEADER_DEPTH, Trace, TraceEvent, TraceFormatError, load_trace

TRACES = Path(__file__).resolve().parents[1] / "traces"
SHIPPED = sorted(TRACES.glob("*.jsonl"))


def _lines() -> list[str]:
    return (TRACES / "preemption.jsonl").read_text().splitlines()


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("depth", [100_000, MAX_HEADER_DEPTH + 4])
def test_a_header_nested_too_deep_is_refused_with_its_line(tmp_path, depth):
    lines = _lines()
    lines[0] = lines[0][:-1] + f', "extra": {_nested(depth)}}}'
    with pytest.raises(TraceFormatError, match="line 1: .*(nested too deeply|levels deep)"):
        load_trace(_write(tmp_path / "deep.jsonl", lines))


def test_an_event_nested_too_deep_is_refused_or_skipped_when_lenient(tmp_path):
    lines = _lines()
    lines[6] = lines[6][:-1] + f', "extra": {_nested(100_000)}}}'
    path = _write(tmp_path / "deep.jsonl", lines)
    with pytest.raises(TraceFormatError, match="line 7: nested too deeply"):
        load_trace(path)
    with pytest.warns(UserWarning, match="line 7: nested too deeply"):
        trace = load_trace(path, strict=False)
    assert len(trace.events) == len(lines) - 2  # the header and the one bad line


def _impossible(kind: str) -> Trace:
    events = [TraceEvent(e.i, e.t_ns, e.event, e.phase, e.step, e.reason, e.stats)
              for e in load_trace(TRACES / "preemption.jsonl").events]
    stepped = [e for e in events if e.step is not None]
    if kind == "duplicated step":
        done = [e for e in events if e.event == "STEP_DONE"]
        done[5].step = done[4].step
    elif kind == "identical steps":
        for e in stepped:
            e.step = 1
    elif kind == "steps descending":
        last = max(e.step for e in stepped)
        for e in stepped:
            e.step = last + 1 - e.step
    elif kind == "shuffled and renumbered":
        random.Random(0).shuffle(events)
        for i, e in enumerate(events):
            e.i = i
    return Trace(load_trace(TRACES / "preemption.jsonl").header, events)


@pytest.mark.parametrize("kind", ["duplicated step", "identical steps", "steps descending", "shuffled and renumbered"])
def test_an_impossible_order_is_found(kind):
    problems = order_problems(_impossible(kind))
    assert problems and problems == check_consistency(_impossible(kind))[:len(problems)]
    assert all(len(p) < 300 for p in problems)  # the first break of each rule, with a count, not thousands


def test_the_shuffled_trace_is_caught_by_each_rule():
    said = " / ".join(order_problems(_impossible("shuffled and renumbered")))
    assert "its clock reads" in said and "steps do not go back" in said and "before it was enqueued" in said


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_shipped_trace_is_in_order(path):
    assert order_problems(load_trace(path)) == []



def test_a_dollar_in_a_scenario_name_is_drawn_as_written(tmp_path):
    """Matplotlib reads "$...$" as mathematics, and a malformed formula fails the drawing: every picture of a
    trace draws its words as written."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from nanovllm_teach.viz import Player, compare, plot_gantt, plot_timelines
    from nanovllm_teach.viz.report import plot_overview

    lines = _lines()
    header = json.loads(lines[0])
    header["scenario"] = "a$\\invalid{$"
    lines[0] = json.dumps(header)
    trace = load_trace(_write(tmp_path / "math.jsonl", lines))
    figures = [plot_timelines(trace), plot_gantt(trace), plot_overview(trace), compare(trace, trace).figure]
    for figure in figures:
        FigureCanvasAgg(figure).draw()
    assert Player(trace).picture()[:4] == b"\x89PNG"  # its static picture too
    assert figures[0].get_suptitle().startswith("a$\\invalid{$")


def _shuffled_file(tmp_path: Path) -> Path:
    """A trace file two of whose events swapped places (and were renumbered to hide it)."""
    lines = _lines()
    events = [json.loads(line) for line in lines[1:]]
    events[10], events[40] = events[40], events[10]
    for i, event in enumerate(events):
        event["i"] = i
    return _write(tmp_path / "shuffled.jsonl", [lines[0]] + [json.dumps(e) for e in events])


@pytest.mark.parametrize("command", [["replay", "{path}", "--text"], ["diff", "{path}", "{path}"],
                                     ["compare", "{path}", "{path}"]])
def test_an_impossible_trace_is_refused_by_the_cli_in_one_line(tmp_path, capsys, command):
    from nanovllm_teach.cli import main

    path = str(_shuffled_file(tmp_path))
    assert main([part.format(path=path) for part in command]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.strip()
    assert "\n" not in err and "not a trace an engine could have written" in err and "--lenient" in err


def test_lenient_shows_an_impossible_trace_after_one_warning(tmp_path, capsys):
    from nanovllm_teach.cli import main

    assert main(["replay", str(_shuffled_file(tmp_path)), "--text", "--lenient"]) == 0
    captured = capsys.readouterr()
    assert captured.err.startswith("warning: ") and captured.err.count("\n") == 1
    assert "step" in captured.out


@pytest.mark.parametrize("command", [["replay", "{path}", "--text"], ["diff", "{path}", "{path}"]])
def test_a_deep_trace_is_refused_by_the_cli_in_one_line(tmp_path, capsys, command):
    from nanovllm_teach.cli import main

    lines = _lines()
    lines[0] = lines[0][:-1] + f', "extra": {_nested(100_000)}}}'
    path = str(_write(tmp_path / "deep.jsonl", lines))
    assert main([part.format(path=path) for part in command]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "nested too deeply" in err


def _escaping_file(tmp_path: Path) -> Path:
    """A valid trace whose scenario name and one reason carry terminal escape sequences (a window title, a
    screen clear, a colour)."""
    lines = _lines()
    header = json.loads(lines[0])
    header["scenario"] = "\x1b]0;HACKED\x07\x1b[2J"
    event = json.loads(lines[3])
    event["reason"] = "evil\x1b[31m\u202e"
    lines[0], lines[3] = json.dumps(header), json.dumps(event)
    return _write(tmp_path / "escapes.jsonl", lines)


@pytest.mark.parametrize("command", [["compare", "{path}", "{path}"], ["replay", "{path}", "--text"],
                                     ["diff", "{path}", str(TRACES / "preemption.jsonl")]])
def test_the_cli_shows_a_traces_control_characters_as_escapes(tmp_path, capfd, command):
    from nanovllm_teach.cli import main

    path = str(_escaping_file(tmp_path))
    assert main([part.format(path=path) for part in command]) in (0, 1)
    captured = capfd.readouterr()
    shown = captured.out + captured.err
    assert "\x1b" not in shown and "\x07" not in shown and "\u202e" not in shown
    if command[0] == "compare":  # the scenario names each half: shown, escaped
        assert "\\x1b]0;HACKED\\x07" in shown


def test_the_teaching_lines_show_control_characters_as_escapes(tmp_path):
    import io

    from nanovllm_teach.trace import render_trace

    out = io.StringIO()
    render_trace(load_trace(_escaping_file(tmp_path)), verbosity="quiet", stream=out)
    assert "reason=evil\\x1b[31m\\u202e" in out.getvalue() and "\x1b" not in out.getvalue()
