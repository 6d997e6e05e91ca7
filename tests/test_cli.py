"""The ``nanovllm-teach`` command: the demo produces its log, trace and picture; record regenerates a trace."""

from __future__ import annotations

from nanovllm_teach.cli import main
from nanovllm_teach.trace import load_trace


def test_demo_writes_log_trace_and_picture(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--max-tokens", "48", "--lang", "zh"]) == 0
    out = capsys.readouterr().out
    assert "TEACHING/SCHEDULE_PREFILL | phase=prefill | reason=waiting 队列有可准入请求" in out
    assert "step#1 prefill done in" in out
    assert "Completion:" in out
    trace = load_trace(tmp_path / "demo_trace.jsonl")
    assert trace.header["config"]["max_num_seqs"] == 512
    assert trace.steps[0].phase == "prefill" and trace.steps[0].batch_size == 2
    picture = tmp_path / "demo_timeline.png"
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_record_unknown_scenario_is_an_error(capsys):
    assert main(["record", "no_such_scenario"]) == 2
    assert "choose from" in capsys.readouterr().err
