"""``nanovllm-teach serve`` tested with real clients on 127.0.0.1, each call bounded in time: the official
``openai`` package (completions and chat, streamed and not; greedy streamed text equal to the non-streamed
text and to offline ``generate``), raw HTTP for what a well-behaved client never sends (bad requests, a
client that leaves mid-stream), ``/metrics`` under vLLM's names, and ``--trace`` replayed afterwards."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("fastapi")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

from serve_helpers import MODEL, metric, running_server, wait_until  # noqa: E402

PROMPTS = ["Once upon a time", "The capital of France is"]
CHAT = [{"role": "system", "content": "You are brief."}, {"role": "user", "content": "Hi there, who are you?"}]


@pytest.fixture(scope="module")
def served():
    with running_server() as (url, app):
        yield url, app


@pytest.fixture(scope="module")
def client(served):
    return openai.OpenAI(base_url=served[0] + "/v1", api_key="none", max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def offline():
    from nanovllm_teach import LLM
    llm = LLM(max_model_len=512)
    yield llm
    llm.close()


def _offline_text(llm, prompt, max_tokens):
    from nanovllm_teach import SamplingParams
    return llm.generate([prompt], SamplingParams(temperature=0.0, max_tokens=max_tokens), use_tqdm=False)[0]["text"]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_completions_streamed_equals_non_streamed_equals_offline(client, offline, prompt):
    whole = client.completions.create(model=MODEL, prompt=prompt, max_tokens=24, temperature=0)
    chunks = list(client.completions.create(model=MODEL, prompt=prompt, max_tokens=24, temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    streamed = "".join(c.choices[0].text for c in chunks if c.choices)
    assert whole.choices[0].text == streamed == _offline_text(offline, prompt, 24)
    assert whole.choices[0].finish_reason in ("stop", "length")
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == whole.choices[0].finish_reason
    assert chunks[-1].choices == [] and chunks[-1].usage == whole.usage, "one usage chunk, last"
    assert all(c.usage is None for c in chunks[:-1])
    assert whole.usage.total_tokens == whole.usage.prompt_tokens + whole.usage.completion_tokens
    assert whole.usage.prompt_tokens == len(offline.tokenizer.encode(prompt, add_special_tokens=False))


def test_chat_streamed_equals_non_streamed_equals_offline(client, offline):
    whole = client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=32, temperature=0)
    chunks = list(client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=32, temperature=0,
                                                 stream=True))
    assert chunks[0].choices[0].delta.role == "assistant" and not chunks[0].choices[0].delta.content, "role first"
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks)
    ids = offline.tokenizer.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True)
    ids = offline.tokenizer.encode(ids, add_special_tokens=False)
    assert whole.choices[0].message.content == streamed == _offline_text(offline, ids, 32)
    assert whole.choices[0].message.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == whole.choices[0].finish_reason
    assert whole.usage.prompt_tokens == len(ids)
    assert whole.usage.completion_tokens == len(offline.generate(
        [ids], __import__("nanovllm_teach").SamplingParams(temperature=0.0, max_tokens=32), use_tqdm=False)[0]["token_ids"])


def test_ignore_eos_runs_to_max_tokens_and_models_lists_the_model(client):
    out = client.completions.create(model=MODEL, prompt="Hello", max_tokens=40, temperature=0.7, seed=3,
                                    extra_body={"ignore_eos": True})
    assert out.usage.completion_tokens == 40 and out.choices[0].finish_reason == "length"
    assert [m.id for m in client.models.list().data] == [MODEL]


BAD = [
    ("unknown model", "/v1/completions", {"model": "gpt-4", "prompt": "x"}, 404, "does not exist"),
    ("negative max_tokens", "/v1/completions", {"model": MODEL, "prompt": "x", "max_tokens": -3}, 400, "max_tokens"),
    ("empty messages", "/v1/chat/completions", {"model": MODEL, "messages": []}, 400, "messages"),
    ("empty prompt", "/v1/completions", {"model": MODEL, "prompt": ""}, 400, "prompt is empty"),
    ("prompt over max_model_len", "/v1/completions", {"model": MODEL, "prompt": "hello " * 700}, 400, "max_model_len"),
    ("token id outside the vocabulary", "/v1/completions", {"model": MODEL, "prompt": [1, 10**9]}, 400, "vocabulary"),
    ("unsupported field", "/v1/completions", {"model": MODEL, "prompt": "x", "presence_penalty": 0.5}, 400,
     "presence_penalty"),
    ("top_p out of range", "/v1/completions", {"model": MODEL, "prompt": "x", "top_p": 2}, 400, "top_p"),
    ("an empty stop string", "/v1/completions", {"model": MODEL, "prompt": "x", "stop": ["a", ""]}, 400, "stop"),
    ("too many logprobs", "/v1/completions", {"model": MODEL, "prompt": "x", "logprobs": 99}, 400, "logprobs"),
    ("top_logprobs without logprobs", "/v1/chat/completions",
     {"model": MODEL, "messages": CHAT, "top_logprobs": 2}, 400, "top_logprobs"),
    ("n of zero", "/v1/completions", {"model": MODEL, "prompt": "x", "n": 0}, 400, "n must"),
    ("wrong type", "/v1/completions", {"model": MODEL, "prompt": "x", "temperature": "hot"}, 400, "temperature"),
    ("negative temperature", "/v1/chat/completions",
     {"model": MODEL, "messages": CHAT, "temperature": -1}, 400, "temperature"),
    ("unknown role", "/v1/chat/completions", {"model": MODEL, "messages": [{"role": "wizard", "content": "x"}]},
     400, "messages.0.role"),
]


@pytest.mark.parametrize("name,path,body,status,reason", BAD, ids=[b[0] for b in BAD])
def test_bad_requests_get_a_4xx_with_the_reason_and_the_server_keeps_serving(served, name, path, body, status, reason):
    url, app = served
    response = httpx.post(url + path, json=body, timeout=30)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert reason in error["message"] or reason == error["param"], error
    assert error["type"] == "invalid_request_error"
    assert httpx.get(url + "/health", timeout=10).status_code == 200
    ok = httpx.post(url + "/v1/completions", json={"model": MODEL, "prompt": "Hi", "max_tokens": 2}, timeout=30)
    assert ok.status_code == 200, "the server keeps serving"


def test_invalid_json_and_a_10_mb_body_are_refused(served):
    url, _ = served
    response = httpx.post(url + "/v1/completions", content=b'{"model": ', timeout=30,
                          headers={"content-type": "application/json"})
    assert response.status_code == 400 and "not valid JSON" in response.json()["error"]["message"]
    big = json.dumps({"model": MODEL, "prompt": "a" * (10 << 20)}).encode()
    response = httpx.post(url + "/v1/completions", content=big, timeout=30, headers={"content-type": "application/json"})
    assert response.status_code == 413 and "bytes" in response.json()["error"]["message"]

    def chunks():  # no Content-Length: the limit holds on what arrives
        for _ in range(12):
            yield b"a" * (1 << 20)
    response = httpx.post(url + "/v1/completions", content=chunks(), timeout=30)
    assert response.status_code == 413


def test_a_full_queue_answers_503_with_retry_after(served):
    url, app = served
    server = app.state.server
    server.in_flight += server.capacity  # as if that many requests were in flight
    try:
        response = httpx.post(url + "/v1/completions", json={"model": MODEL, "prompt": "x"}, timeout=30)
    finally:
        server.in_flight -= server.capacity
    assert response.status_code == 503 and response.headers["retry-after"] == "1"
    assert "queue is full" in response.json()["error"]["message"]


def _blocks_held(app) -> int:
    engine = app.state.server.engine
    with engine.lock:  # the engine thread's between its steps
        return engine.scheduler.block_manager.num_blocks - engine.scheduler.block_manager.num_free_blocks


def test_clients_that_leave_have_their_requests_aborted_and_blocks_freed(served):
    url, app = served
    body = {"model": MODEL, "prompt": "Tell me a long story", "max_tokens": 400, "ignore_eos": True,
            "temperature": 0, "stream": True}
    with httpx.Client(timeout=30) as http:
        for _ in range(3):  # streamed: leave after a few chunks
            with http.stream("POST", url + "/v1/completions", json=body) as response:
                lines = response.iter_lines()
                got = [next(lines) for _ in range(6)]
                assert got[0].startswith("data: ")
                assert metric(http.get(url + "/metrics").text, "vllm:num_requests_running") >= 1
        with pytest.raises(httpx.ReadTimeout):  # not streamed: leave before the answer
            http.post(url + "/v1/completions", json={**body, "stream": False}, timeout=0.5)
        assert wait_until(lambda: metric(http.get(url + "/metrics").text, "vllm:num_requests_running") == 0)
        text = http.get(url + "/metrics").text
    assert metric(text, "nanovllm:requests_aborted_total") >= 4
    assert wait_until(lambda: _blocks_held(app) == 0), "every block freed"
    assert app.state.server.in_flight == 0


def test_metrics_have_vllm_names_and_count_what_was_served(served, client):
    url, _ = served
    before = httpx.get(url + "/metrics", timeout=10).text
    client.completions.create(model=MODEL, prompt="Count", max_tokens=5, temperature=0, extra_body={"ignore_eos": True})
    text = httpx.get(url + "/metrics", timeout=10).text
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:gpu_cache_usage_perc",
                 "vllm:time_to_first_token_seconds_count", "vllm:time_per_output_token_seconds_count",
                 "vllm:e2e_request_latency_seconds_count", "vllm:request_queue_time_seconds_count",
                 "vllm:iteration_tokens_total_count"):
        assert name in text, name
    for name in ("vllm:time_to_first_token_seconds_count", "vllm:e2e_request_latency_seconds_count"):
        assert metric(text, name) == metric(before, name) + 1, name
    assert metric(text, "vllm:generation_tokens_total") - metric(before, "vllm:generation_tokens_total") == 5
    assert metric(text, "vllm:gpu_cache_usage_perc") == 0.0 and metric(text, "vllm:num_requests_waiting") == 0


def test_trace_records_the_live_run_and_replays(tmp_path):
    from nanovllm_teach.trace import load_trace
    from nanovllm_teach.trace.consistency import check_consistency
    from nanovllm_teach.viz.page import replay_page

    path = tmp_path / "run.jsonl"
    with running_server(trace=path, live=False) as (url, _):
        client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=60)
        client.completions.create(model=MODEL, prompt="One", max_tokens=6, temperature=0)
        client.chat.completions.create(model=MODEL, messages=CHAT, max_tokens=6, temperature=0)
    trace = load_trace(path)
    assert check_consistency(trace) == []
    assert len(trace.requests) == 2 and all(r.finish_reason for r in trace.requests)
    enqueues = trace.events_named("REQUEST_ENQUEUE")
    assert enqueues[1].t_ns > enqueues[0].t_ns, "real arrival times"
    assert "<html" in replay_page(trace)


def test_serve_command_mistakes_are_one_line(capsys):
    from nanovllm_teach.cli import main
    assert main(["serve", "--port", "70000"]) == 2
    assert "--port" in capsys.readouterr().err


def test_streamed_pieces_add_up_to_the_whole_text():
    """Whatever the tokens (cut characters, special tokens, byte fallbacks), the pieces a stream sends add up
    to exactly the text ``generate`` returns, and none ends in a half character."""
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import strategies as st
    from transformers import AutoTokenizer

    from nanovllm_teach.assets import default_model_path
    from nanovllm_teach.serve.detokenize import IncrementalText

    tokenizer = AutoTokenizer.from_pretrained(default_model_path())
    chinese = tokenizer.encode("在线服务：首 token 延迟 🙂", add_special_tokens=False)

    @hypothesis.settings(max_examples=60, deadline=None)
    @hypothesis.given(st.lists(st.one_of(st.integers(0, tokenizer.vocab_size - 1), st.sampled_from(chinese)),
                               max_size=30), st.integers(1, 3))
    def check(ids, per_update):
        text = IncrementalText(tokenizer)
        pieces = [text.add(ids[k:k + per_update]) for k in range(0, len(ids), per_update)]
        pieces.append(text.finish())
        assert "".join(pieces) == tokenizer.decode(ids, skip_special_tokens=True)
        assert not any(piece.endswith("\ufffd") for piece in pieces[:-1])
    check()


def test_the_serving_benchmark_runs_and_its_checks_pass():
    """benchmarks/bench_serve.py on a tiny load (its numbers belong in RESULTS.md; here only its checks)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, str(root / "benchmarks" / "bench_serve.py"), "--saturation", "--disconnects",
                           "--requests", "4", "--output-len", "8", "--repeats", "1", "--poisson-requests", "30",
                           "--rate", "60"], capture_output=True, text=True, cwd=root, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "of offline" in done.stdout and "0 KV blocks held" in done.stdout
