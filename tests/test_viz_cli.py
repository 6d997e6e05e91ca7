"""``nanovllm-teach replay`` and ``nanovllm-teach compare``, run through ``cli.main([...])``, and the HTML
report: self-contained, complete, and safe against markup smuggled into a trace's strings.

Traces: ``data/small_trace.jsonl`` and ``test_viz_replay.viz_traces`` (recorded once per session).
"""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

import pytest
from PIL import Image

from nanovllm_teach.cli import main
from nanovllm_teach.trace import format_request_table, format_step_table, load_trace
from nanovllm_teach.viz import html_report
from test_viz_replay import viz_traces

SMALL_TRACE = Path(__file__).resolve().parent / "data" / "small_trace.jsonl"
EVIL = "<script>alert('x')</script>"


def png_size(path_or_bytes) -> tuple[int, int]:
    data = path_or_bytes if isinstance(path_or_bytes, bytes) else Path(path_or_bytes).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return Image.open(io.BytesIO(data)).size


def test_replay_text_summarises_and_all_prints_every_row(capsys):
    assert main(["replay", str(SMALL_TRACE), "--text"]) == 0
    out = capsys.readouterr().out
    trace = load_trace(SMALL_TRACE)
    assert len(trace.steps) > 20
    assert out.startswith(f"{len(trace.steps)} steps (3 prefill, {len(trace.steps) - 3} decode)")
    assert format_step_table(trace.steps, limit=20) in out and "--all prints every one" in out
    assert format_step_table(trace.steps) not in out
    assert main(["replay", str(SMALL_TRACE)]) == 0  # the summary is the default
    assert capsys.readouterr().out == out
    assert main(["replay", str(SMALL_TRACE), "--all"]) == 0
    everything = capsys.readouterr().out
    assert format_step_table(trace.steps) in everything and format_request_table(trace.requests) in everything


def test_replay_picture_page_and_report(tmp_path, capsys):
    png, page, report = tmp_path / "out" / "timeline.png", tmp_path / "page.html", tmp_path / "report.html"
    assert main(["replay", str(SMALL_TRACE), "--out", str(png), "--html", str(page), "--report", str(report)]) == 0
    out = capsys.readouterr().out
    assert all(str(path) in out for path in (png, page, report)) and "step  phase" not in out  # no tables unless asked
    width, height = png_size(png)
    assert width >= 1000 and height >= 1000  # five timelines above the Gantt chart

    interactive = page.read_text(encoding="utf-8")
    assert 'id="trace-data"' in interactive and "<script" in interactive  # the replay page: data and player
    assert not re.search(r'(src|href)="(?!data:|#)', interactive)  # self-contained: nothing to fetch

    text = report.read_text(encoding="utf-8")
    trace = load_trace(SMALL_TRACE)
    images = re.findall(r'<img alt="[^"]*" src="data:image/png;base64,([A-Za-z0-9+/=]+)">', text)
    assert len(images) == 2 and all(png_size(base64.b64decode(data))[0] > 100 for data in images)
    assert not re.search(r'(src|href)="(?!data:)', text)  # self-contained: nothing to fetch
    assert "<script" not in text
    table = text.split("<h2>Requests</h2>")[1].split("</table>")[0]
    assert table.count("<tr>") == len(trace.requests) + 1  # header + one row per request
    assert all(f"<td>{r.seq_id}</td><td>{r.prompt_len}</td>" in table for r in trace.requests)


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".svg", b"<?xml"), (".pdf", b"%PDF"),
                                           (".SVG", b"<?xml")])
def test_the_picture_format_follows_the_suffix(tmp_path, capsys, suffix, magic):
    replay, side_by_side = tmp_path / f"replay{suffix}", tmp_path / f"compare{suffix}"
    assert main(["replay", str(SMALL_TRACE), "--out", str(replay)]) == 0
    assert main(["compare", str(SMALL_TRACE), str(SMALL_TRACE), "--out", str(side_by_side)]) == 0
    assert replay.read_bytes().startswith(magic) and side_by_side.read_bytes().startswith(magic)
    if suffix.lower() == ".svg":
        assert b"<svg" in replay.read_bytes()[:2000]


def test_report_escapes_every_string_from_the_trace(tmp_path):
    lines = SMALL_TRACE.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    header.update(scenario=EVIL, lesson='<img src=x onerror="alert(1)">', **{"</td><b>key": "a & b"})
    header["config"]["model"] = "</pre><iframe>"
    events = [json.loads(line) for line in lines[1:]]
    for e in events:
        if e["event"] == "REQUEST_ENQUEUE":
            e["stats"]["prompt"] = f'<b onmouseover="x">bold</b> & {EVIL}'
    evil = tmp_path / "evil.jsonl"
    evil.write_text("\n".join(json.dumps(x) for x in [header, *events]) + "\n", encoding="utf-8")

    text = html_report(load_trace(evil))
    for raw in (EVIL, "<img src=x", "</td><b>", "<b onmouseover", "</pre><iframe>", "<iframe"):
        assert raw not in text
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in text  # the title and the prompts
    assert "&lt;/td&gt;&lt;b&gt;key" in text and "a &amp; b" in text
    assert text.count("&lt;b onmouseover=&quot;x&quot;&gt;bold&lt;/b&gt; &amp; ") == 3  # one per request
    assert "&lt;/pre&gt;&lt;iframe&gt;" in text


def test_compare_prints_the_summary_and_draws(tmp_path, tmp_path_factory, capsys):
    recorded = viz_traces(tmp_path_factory.getbasetemp())
    out = tmp_path / "cmp.png"
    assert main(["compare", str(recorded["static"].path), str(recorded["continuous"].path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    header = printed.splitlines()[0].split()
    assert header == ["static", "continuous"]
    for name in ("tokens / step", "tokens / s", "mean TTFT (ms)", "early-finished waste", "late-joining waste"):
        assert name in printed
    width, height = png_size(out)
    assert width > height > 400


def test_unreadable_traces_are_refused_clearly(tmp_path, capsys):
    assert main(["replay", str(tmp_path / "missing.jsonl")]) == 2
    assert capsys.readouterr().err == f"nanovllm-teach: error: no such trace file: {tmp_path / 'missing.jsonl'}\n"
    cut = tmp_path / "cut.jsonl"
    data = SMALL_TRACE.read_bytes()
    cut.write_bytes(data[:len(data) // 2])  # stops in the middle of a line
    assert main(["replay", str(cut), "--text"]) == 2
    err = capsys.readouterr().err
    assert "truncated last line" in err and "--lenient" in err
    with pytest.warns(UserWarning, match="keeping the .* events before it"):
        assert main(["replay", str(cut), "--text", "--lenient"]) == 0  # the valid part replays
    assert "step  phase" in capsys.readouterr().out
    assert main(["compare", str(SMALL_TRACE), str(cut)]) == 2


@pytest.mark.parametrize("argv", [["replay"], ["compare", "one.jsonl"]])
def test_missing_arguments_are_usage_errors(argv):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2


TRACES = Path(__file__).resolve().parents[1] / "traces"


@pytest.mark.parametrize("lang, says", [("en", "ran different workloads (2 requests against 8)"),
                                        ("zh", "运行的是不同的工作负载（2 个请求对 8 个请求）")])
def test_compare_warns_when_the_two_traces_ran_different_workloads(capsys, lang, says):
    """One line on stderr, in the learner's language; the comparison is still shown."""
    a, b = TRACES / "walkthrough.jsonl", TRACES / "preemption.jsonl"
    assert main(["compare", str(a), str(b), "--lang", lang]) == 0
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and says in err and str(a) in err and str(b) in err, err
    assert out.strip()


def test_compare_warns_on_one_request_asked_otherwise(tmp_path, capsys):
    lines = SMALL_TRACE.read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if '"REQUEST_ENQUEUE"' in line)
    event = json.loads(lines[first])
    event["stats"]["max_tokens"] += 1
    lines[first] = json.dumps(event)
    other = tmp_path / "other.jsonl"
    other.write_text("\n".join(lines) + "\n")
    assert main(["compare", str(SMALL_TRACE), str(other)]) == 0
    err = capsys.readouterr().err
    assert f"seq {event['stats']['seq_id']}: " in err and "max_tokens" in err, err


def test_compare_is_quiet_on_the_same_requests_under_two_policies(capsys):
    """The same arrivals under static and continuous batching: two workload names, one set of requests."""
    assert main(["compare", str(TRACES / "static_arrivals.jsonl"), str(TRACES / "continuous_arrivals.jsonl")]) == 0
    assert capsys.readouterr().err == ""
