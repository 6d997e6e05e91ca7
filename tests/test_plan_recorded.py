"""``plan --workload-trace``: a trace's finished requests as the planner's workload (``plan/recorded.py``), and a
damaged or hostile file refused in one line with exit status 2."""

from __future__ import annotations

import json

import pytest

from nanovllm_teach.cli import main
from nanovllm_teach.plan import recorded as plan_recorded
from nanovllm_teach.plan.probes import Candidate, Objective, PlanWorkload, probe
from nanovllm_teach.plan.recorded import read_recorded_requests

PLAN = ["plan", "--model", "qwen3-0.6b", "--rate", "10", "--gpus", "l4", "--price", "l4=0.8", "--tp", "1",
        "--max-num-seqs", "64", "--max-num-batched-tokens", "2048", "--max-model-len", "2048", "--replicas", "1,2",
        "--serial", "--resolution", "0.3"]


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("recorded") / "t.jsonl"
    assert main(["simulate", "--model", "qwen3-0.6b", "--hardware", "l4", "--requests", "30", "--rate", "20",
                 "--prompt-lens", "uniform:16:64", "--output-lens", "uniform:4:16", "--out", str(path)]) == 0
    return path


def test_the_trace_gives_each_request_its_lengths_and_gaps_scaled_to_the_rate(trace_file):
    recorded = read_recorded_requests(trace_file)
    assert len(recorded.prompt_lens) == 30 and recorded.source == "t.jsonl"
    assert all(16 <= p <= 64 for p in recorded.prompt_lens) and all(4 <= o <= 16 for o in recorded.output_lens)
    requests = recorded.requests(65, 2 * recorded.mean_rate, vocab_size=1000, seed=0)
    assert [len(r.prompt_token_ids) for r in requests[:30]] == list(recorded.prompt_lens)
    assert [r.output_len for r in requests[30:60]] == list(recorded.output_lens)  # served again from its start
    gaps = [b.arrival_s - a.arrival_s for a, b in zip(requests, requests[1:30])]
    assert gaps == pytest.approx([g / 2 for g in recorded.gaps_s])  # twice the rate: half the gaps
    assert requests[30].arrival_s - requests[29].arrival_s == pytest.approx(0.5 / recorded.mean_rate)
    assert {r.arrival_s for r in recorded.requests(40, None, vocab_size=1000, seed=0)} == {0.0}


def test_plan_searches_the_recorded_workload(trace_file, tmp_path, capsys):
    out = tmp_path / "plan.json"
    assert main([*PLAN, "--workload-trace", str(trace_file), "--out", str(out), "--log", str(tmp_path / "l")]) == 0
    printed = capsys.readouterr().out
    assert "simulate cannot serve it" in printed
    answer = json.loads(out.read_text())
    assert answer["workload"]["recorded"]["source"] == "t.jsonl" and answer["workload"]["recorded"]["requests"] == 30
    assert answer["cheapest"]["command"] is None and answer["cheapest"]["replica_rate"] > 0
    # the same search resumes from its log: a recorded workload's settings read back equal
    assert main([*PLAN, "--workload-trace", str(trace_file), "--out", str(out), "--log", str(tmp_path / "l")]) == 0
    recorded = read_recorded_requests(trace_file)
    workload = PlanWorkload("qwen3-0.6b", max_model_len=2048, warmup_requests=100, recorded=recorded)
    assert probe(Candidate("l4", 1, 64, 2048), workload, Objective(200.0, 20.0), 1.0).passed


def _damaged(tmp_path, trace_file, kind):
    path = tmp_path / f"{kind}.jsonl"
    lines = trace_file.read_text().splitlines(keepends=True)
    if kind == "garbage":
        path.write_bytes(b"\x00\xff not a trace\n")
    elif kind == "cut":
        path.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    elif kind == "wrong-field":
        path.write_text("".join(lines[:3]) + lines[3].replace('"t_ns":', '"t_ns":"soon","x":'))
    elif kind == "one-request":
        path.write_text(lines[0])
    elif kind == "missing":
        return tmp_path / "nowhere.jsonl"
    return path


@pytest.mark.parametrize("kind, message", [
    ("garbage", "--workload-trace"), ("cut", "--workload-trace"), ("wrong-field", "--workload-trace"),
    ("one-request", "finished request(s); a workload needs at least 2"), ("missing", "cannot be read"),
])
def test_a_damaged_trace_is_one_line_and_exit_2(tmp_path, capsys, trace_file, kind, message):
    path = _damaged(tmp_path, trace_file, kind)
    assert main([*PLAN, "--workload-trace", str(path), "--log", str(tmp_path / "l")]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_a_trace_too_large_is_refused_before_it_is_read(tmp_path, capsys, trace_file, monkeypatch):
    monkeypatch.setattr(plan_recorded, "MAX_TRACE_BYTES", 100)
    monkeypatch.setattr("nanovllm_teach.trace.reader.load_trace", lambda *a, **k: pytest.fail("read it"))
    assert main([*PLAN, "--workload-trace", str(trace_file), "--log", str(tmp_path / "l")]) == 2
    assert "more than the 100 a workload's trace may have" in capsys.readouterr().err
