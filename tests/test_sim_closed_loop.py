"""Closed-loop load (``concurrency``): a fixed pool of clients, each sending its next request when its last one
finishes; and the progress bar a long run shows."""

from __future__ import annotations

import pytest

from nanovllm_teach import LLM
from nanovllm_teach.trace.reader import Trace
from nanovllm_teach.trace.recorder import TraceRecorder
from nanovllm_teach.workload.arrivals import serve_workload
from nanovllm_teach.workload.requests import AtOnce, Poisson, Uniform, make_workload


def _serve(concurrency, n=24, progress=False):
    rec = TraceRecorder()
    llm = LLM("qwen3-0.6b", runner="simulated", hardware="l4", max_model_len=1024, trace=rec)
    workload = make_workload(n, Poisson(1e-3), Uniform(20, 200), Uniform(5, 40), vocab_size=1000, seed=3)
    result = serve_workload(llm, workload, answers=llm.answers, concurrency=concurrency, progress=progress)
    return result, Trace.from_recorder(rec)


def test_a_closed_loop_keeps_exactly_n_requests_in_flight_and_sends_each_when_one_finishes():
    result, trace = _serve(3)
    assert len(result.requests) == 24 and all(r.finish_s is not None for r in result.requests.values())
    # Arrival times are ignored (Poisson at 1e-3/s would span hours): the run takes seconds.
    assert result.duration_s < 60
    in_flight = [row.waiting_in_step + row.running_in_step for row in trace.steps]
    assert max(in_flight) == 3 and in_flight[0] == 3
    finishes = sorted(r.finish_s for r in result.requests.values())
    arrivals = sorted(r.arrival_s for r in result.requests.values())
    assert arrivals[:3] == [0.0] * 3
    assert set(arrivals[3:]) <= set(finishes)  # every later request joins at the end of a step that finished one


def test_more_clients_than_requests_is_all_at_once_and_one_client_is_one_at_a_time():
    everyone, _ = _serve(100, n=6)
    assert {r.arrival_s for r in everyone.requests.values()} == {0.0}
    _, alone = _serve(1, n=6)
    assert max(row.running_in_step + row.waiting_in_step for row in alone.steps) == 1


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_concurrency_must_be_a_positive_int(bad):
    llm = LLM("qwen3-0.6b", runner="simulated", hardware="l4", max_model_len=1024)
    with pytest.raises(ValueError, match="concurrency must be"):
        serve_workload(llm, make_workload(2, AtOnce(), Uniform(5, 9), Uniform(5, 9), vocab_size=100),
                       answers=llm.answers, concurrency=bad)


def test_progress_shows_requests_done_on_stderr(capsys):
    _serve(None, n=8, progress=True)
    err = capsys.readouterr().err
    assert "serving" in err and "8/8" in err
