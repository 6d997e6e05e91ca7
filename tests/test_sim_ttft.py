"""One TTFT, from each request's arrival: what a served workload measures (``WorkloadResult``) and what its
trace's request table says (``replay``) are the same figure, request by request; the part the engine saw,
from the enqueue, is named as such; traces from before the arrival was recorded load with each arrival at
its enqueue."""

from __future__ import annotations

from pathlib import Path

import pytest

from nanovllm_teach import LLM
from nanovllm_teach.sim.cost_model import load_shape
from nanovllm_teach.trace.reader import Trace, load_trace
from nanovllm_teach.trace.recorder import TraceRecorder
from nanovllm_teach.workload.arrivals import ApiServer, serve_workload
from nanovllm_teach.workload.requests import Poisson, Request, Uniform, make_workload

SHAPE = load_shape("qwen3-0.6b")
SHIPPED = Path(__file__).resolve().parents[1] / "traces"


def _served(**serve_options):
    """A busy Poisson workload (requests arrive while a step runs) through an engine behind a 3 ms front end."""
    rec = TraceRecorder(validate=True)
    llm = LLM("qwen3-0.6b", runner="simulated", hardware="l4", trace=rec)
    workload = make_workload(60, Poisson(40.0), Uniform(50, 800), Uniform(2, 60), vocab_size=SHAPE.vocab_size,
                             seed=5)
    result = serve_workload(llm, workload, answers=llm.answers, server=ApiServer(latency_s=0.003), **serve_options)
    return result, Trace.from_recorder(rec)


@pytest.mark.parametrize("serve_options", [{}, {"admit_every": 4}])
def test_the_trace_and_the_run_give_each_request_the_same_ttft(serve_options):
    result, trace = _served(**serve_options)
    rows = {row.seq_id: row for row in trace.requests}
    waited = 0
    for seq_id, times in result.requests.items():
        row = rows[seq_id]
        assert row.ttft_ms == pytest.approx(times.ttft_s * 1e3, abs=1e-5)  # both stamped in whole ns
        assert row.e2e_ms == pytest.approx((times.finish_s - times.arrival_s) * 1e3, abs=1e-5)
        assert row.enqueue_ttft_ms <= row.ttft_ms - 3.0 + 1e-6  # the front end's 3 ms at least
        waited += row.enqueue_ttft_ms < row.ttft_ms - 3.0 - 1e-6  # arrived while a step ran
    assert waited > 0


def test_a_trace_without_arrivals_counts_from_the_enqueue():
    """The shipped traces were recorded before version 4: each request arrived as it joined."""
    trace = load_trace(SHIPPED / "continuous_arrivals.jsonl")
    assert trace.header["version"] < 4
    for row in trace.requests:
        assert row.arrival_t_ns == row.enqueue_t_ns and row.ttft_ms == row.enqueue_ttft_ms


def test_generate_records_no_wait_before_the_enqueue():
    rec = TraceRecorder(validate=True)
    llm = LLM("qwen3-0.6b", runner="simulated", hardware="l4", trace=rec)
    llm.generate([[1, 2, 3]] * 2)
    assert all("since_arrival_ms" not in e.to_dict()["stats"] for e in rec.events if e.event == "REQUEST_ENQUEUE")


def _burst(server: ApiServer):
    """Eight requests sent at once to an engine behind ``server``, with prompts of 100 to 800 tokens."""
    llm = LLM("qwen3-0.6b", runner="simulated", hardware="l4")
    workload = [Request(0.0, [1] * (100 * (k + 1)), 4) for k in range(8)]
    result = serve_workload(llm, workload, answers=llm.answers, server=server)
    llm.close()
    return [result.requests[seq_id] for seq_id in sorted(result.requests)]


def test_a_burst_waits_in_line_at_the_api_server():
    """The server takes in a burst one request after the other, in the engine's loop, before the engine's first
    step: every first token comes after the server's work on all eight and one latency; the latency is paid once
    per request, not in line."""
    server = ApiServer(latency_s=0.002, per_request_s=0.005, per_prompt_token_s=1e-5)
    served, plain = _burst(server), _burst(ApiServer())
    in_line = sum(server.service_s(100 * (k + 1)) for k in range(8))
    for times, alone in zip(served, plain):
        assert times.arrival_s == alone.arrival_s == 0.0
        assert times.ttft_s == pytest.approx(alone.ttft_s + in_line + server.latency_s)


@pytest.mark.parametrize("bad", [{"per_request_s": -1e-3}, {"per_prompt_token_s": float("nan")},
                                 {"latency_s": True}, {"per_request_s": 60.0}])
def test_the_api_server_refuses_impossible_costs(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        ApiServer(**bad)
